package main

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/envflag/envflagtest"
	"github.com/renderbox/renderbox/internal/worker"
)

// Every flag of worker serve (and of check, selftest, render and reap,
// which take worker.Config's) has its RENDERBOX_ variable and its row in
// docs/settings.md, so the two cannot drift.
func TestSettingsAreDocumented(t *testing.T) {
	envflagtest.Check(t, envflagtest.Table(t, "../../docs/settings.md"), "worker", serveFlags(new(worker.Config), new(worker.ServeConfig)),
		worker.UnsafeNativeFlag) // no variable: TestUnsafeNativeOnlyFromTheCommandLine
}

// Rendering without gVisor is never a default nor an environment file's
// doing: serve runs its jobs natively only with -unsafe-native-bench on
// its command line, and refuses RENDERBOX_UNSAFE_NATIVE_BENCH outright.
func TestUnsafeNativeOnlyFromTheCommandLine(t *testing.T) {
	t.Setenv("RENDERBOX_ROOTFS", t.TempDir())
	_, s, err := serveSettings(nil)
	if err != nil || s.UnsafeNativeBench {
		t.Fatalf("no flag: unsafe native %v, err %v; want false, nil", s.UnsafeNativeBench, err)
	}
	_, s, err = serveSettings([]string{"-unsafe-native-bench"})
	if err != nil || !s.UnsafeNativeBench {
		t.Fatalf("-unsafe-native-bench: unsafe native %v, err %v; want true, nil", s.UnsafeNativeBench, err)
	}
	for _, args := range [][]string{nil, {"-unsafe-native-bench"}} {
		t.Setenv("RENDERBOX_UNSAFE_NATIVE_BENCH", "true")
		_, s, err = serveSettings(args)
		if err == nil || !strings.Contains(err.Error(), "only from the command line") {
			t.Errorf("args %q with RENDERBOX_UNSAFE_NATIVE_BENCH=true: unsafe native %v, err %v; want refused", args, s.UnsafeNativeBench, err)
		}
	}
}

// The command line wins over a variable; a variable sets what the command
// line leaves; RENDERBOX_WORKER_METRICS, the old name of
// RENDERBOX_METRICS_ADDR, still works and is reported for a warning.
func TestSettingsFromTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("RENDERBOX_ROOTFS", dir)
	t.Setenv("RENDERBOX_CONCURRENCY", "3")
	t.Setenv("RENDERBOX_POOL_SIZE", "none")
	t.Setenv("RENDERBOX_SHUTDOWN_TIMEOUT", "45s")
	t.Setenv("RENDERBOX_WORKER_METRICS", "127.0.0.1:7")
	t.Setenv("RENDERBOX_PLATFORM", "ptrace")
	t.Setenv("RENDERBOX_RENDERER", "html-pdf") // an argument of render, not a setting
	var c worker.Config
	var s worker.ServeConfig
	if err := settings(serveFlags(&c, &s), &c, []string{"-concurrency", "4"}); err != nil {
		t.Fatal(err)
	}
	if s.Concurrency != 4 || s.Pool.Sizes != "none" || s.ShutdownTimeout.Seconds() != 45 || s.MetricsAddr != "127.0.0.1:7" || c.Sandbox.Platform != "ptrace" {
		t.Errorf("got concurrency %d, pool %q, shutdown %s, metrics %q, platform %q; want 4 (flag), none, 45s, 127.0.0.1:7, ptrace (variables)",
			s.Concurrency, s.Pool.Sizes, s.ShutdownTimeout, s.MetricsAddr, c.Sandbox.Platform)
	}
	if d := c.Deprecated(); len(d) != 1 || d[0].Use() != "RENDERBOX_METRICS_ADDR" {
		t.Errorf("deprecated variables read: %v, want RENDERBOX_WORKER_METRICS", d)
	}
	if c.Sandbox.StateDir != worker.DefaultStateDir || c.Sandbox.CgroupParent != "renderbox" {
		t.Errorf("got state dir %q, cgroup parent %q; want the defaults %q, renderbox", c.Sandbox.StateDir, c.Sandbox.CgroupParent, worker.DefaultStateDir)
	}
	var renderer string
	var rc worker.Config
	fs := flags("render", "", &rc)
	fs.StringVar(&renderer, "renderer", "", "")
	if _, err := parse(fs, []string{"in.pdf"}, 1); err != nil {
		t.Fatal(err)
	}
	if err := rc.Settle(fs, renderArgs...); err != nil || renderer != "" {
		t.Errorf("render -renderer from RENDERBOX_RENDERER: %q, %v; want none (a job's argument has no variable)", renderer, err)
	}
	t.Setenv("RENDERBOX_HEARTBEAT_INTERVAL", "often")
	var bc worker.Config
	if err := settings(serveFlags(&bc, new(worker.ServeConfig)), &bc, nil); err == nil {
		t.Errorf("RENDERBOX_HEARTBEAT_INTERVAL=often was taken")
	}
}

// Each flag's default is the one docs/settings.md gives, so
// the two cannot drift now that the flag sets carry the defaults.
func TestSettingsDefaultsAreDocumented(t *testing.T) {
	rows := envflagtest.Table(t, "../../docs/settings.md")
	serveFlags(new(worker.Config), new(worker.ServeConfig)).VisitAll(func(f *flag.Flag) {
		for _, r := range rows {
			if r.Of != "worker" || r.Flag != f.Name || f.DefValue == "" {
				continue
			}
			documented := strings.Contains(r.Default, f.DefValue)
			if want, err := time.ParseDuration(f.DefValue); err == nil {
				first, _, _ := strings.Cut(strings.TrimSpace(r.Default), " ")
				got, err := time.ParseDuration(strings.Trim(first, "`"))
				documented = err == nil && got == want
			}
			if !documented {
				t.Errorf("docs/settings.md: -%s of worker defaults to %q, the flag to %q", f.Name, r.Default, f.DefValue)
			}
		}
	})
}

// serve's -h says where /metrics is by default (flag prints the value)
// and that it is loopback only.
func TestMetricsAddrHelpStatesItsDefault(t *testing.T) {
	f := serveFlags(new(worker.Config), new(worker.ServeConfig)).Lookup("metrics-addr")
	if f == nil || f.DefValue != "127.0.0.1:9091" || !strings.Contains(f.Usage, "the default is loopback") || !strings.Contains(f.Usage, `"" disables`) {
		t.Errorf("-metrics-addr: %+v, want its default 127.0.0.1:9091 stated as loopback only", f)
	}
}
