package main

import (
	"flag"
	"testing"

	"github.com/renderbox/renderbox/internal/envflag/envflagtest"
)

// Every flag of worker serve (and of check, selftest, render and reap,
// which take Config's) has its RENDERBOX_ variable and its row in the
// README's settings table, so the two cannot drift.
func TestSettingsAreDocumented(t *testing.T) {
	fs := flag.NewFlagSet("worker serve", flag.ContinueOnError)
	new(Config).bind(fs)
	new(serveConfig).bind(fs)
	envflagtest.Check(t, envflagtest.Table(t, "../../README.md"), "worker", fs)
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
	t.Setenv("RENDERBOX_RENDERER", "html-pdf") // an argument of render, not a setting
	var s serveConfig
	c, _, err := parse("serve", []string{"-concurrency", "4"}, s.bind)
	if err != nil {
		t.Fatal(err)
	}
	if s.Concurrency != 4 || s.Pool.Sizes != "none" || s.ShutdownTimeout.Seconds() != 45 || s.MetricsAddr != "127.0.0.1:7" {
		t.Errorf("got concurrency %d, pool %q, shutdown %s, metrics %q; want 4 (flag), none, 45s, 127.0.0.1:7 (variables)", s.Concurrency, s.Pool.Sizes, s.ShutdownTimeout, s.MetricsAddr)
	}
	if len(c.deprecated) != 1 || c.deprecated[0].Use() != "RENDERBOX_METRICS_ADDR" {
		t.Errorf("deprecated variables read: %v, want RENDERBOX_WORKER_METRICS", c.deprecated)
	}
	var renderer string
	if _, _, err := parse("render", []string{"in.pdf"}, func(fs *flag.FlagSet) { fs.StringVar(&renderer, "renderer", "", "") }); err != nil || renderer != "" {
		t.Errorf("render -renderer from RENDERBOX_RENDERER: %q, %v; want none (a job's argument has no variable)", renderer, err)
	}
	t.Setenv("RENDERBOX_HEARTBEAT_INTERVAL", "often")
	if _, _, err := parse("serve", nil, new(serveConfig).bind); err == nil {
		t.Errorf("RENDERBOX_HEARTBEAT_INTERVAL=often was taken")
	}
}
