package envflag_test

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/envflag"
)

func TestVar(t *testing.T) {
	for in, want := range map[string]string{"metrics-addr": "RENDERBOX_METRICS_ADDR", "db": "RENDERBOX_DB", "pool-image-max-restores": "RENDERBOX_POOL_IMAGE_MAX_RESTORES"} {
		if got := envflag.Var(in); got != want {
			t.Errorf("Var(%q) = %q, want %q", in, got, want)
		}
	}
}

// The command line wins over a variable, a variable over the default, a
// new name over its deprecated alias; an empty variable is unset; a bad
// value names its variable; a command's arguments have none.
func TestApply(t *testing.T) {
	t.Setenv("RENDERBOX_ADDR", "0.0.0.0:1")
	t.Setenv("RENDERBOX_RETENTION", "2h")
	t.Setenv("RENDERBOX_NAME", "")
	t.Setenv("RENDERBOX_RENDERER", "html-pdf")
	t.Setenv("RENDERBOX_WORKER_METRICS", "127.0.0.1:7")
	flags := func() (*flag.FlagSet, *string, *time.Duration, *string, *string, *string) {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return fs, fs.String("addr", "a", ""), fs.Duration("retention", time.Hour, ""), fs.String("name", "n", ""),
			fs.String("renderer", "", ""), fs.String("metrics-addr", "m", "")
	}
	alias := []envflag.Deprecated{{Var: "RENDERBOX_WORKER_METRICS", Flag: "metrics-addr"}}

	fs, addr, ret, name, renderer, metrics := flags()
	if err := fs.Parse([]string{"-addr", "cli:2"}); err != nil {
		t.Fatal(err)
	}
	used, err := envflag.Apply(fs, alias, "renderer")
	if err != nil {
		t.Fatal(err)
	}
	if *addr != "cli:2" || *ret != 2*time.Hour || *name != "n" || *renderer != "" || *metrics != "127.0.0.1:7" {
		t.Errorf("got addr %q, retention %s, name %q, renderer %q, metrics %q; want cli:2 (flag), 2h (variable), n (empty variable), \"\" (an argument), 127.0.0.1:7 (alias)",
			*addr, *ret, *name, *renderer, *metrics)
	}
	if len(used) != 1 || used[0].Use() != "RENDERBOX_METRICS_ADDR" {
		t.Errorf("deprecated aliases used: %v, want RENDERBOX_WORKER_METRICS", used)
	}
	var visited []string
	fs.Visit(func(f *flag.Flag) { visited = append(visited, f.Name) })
	if strings.Join(visited, ",") != "addr" {
		t.Errorf("Visit after Apply: %v, want only the command line's addr", visited)
	}

	t.Setenv("RENDERBOX_METRICS_ADDR", "127.0.0.1:8")
	fs, _, _, _, _, metrics = flags()
	if _, err := envflag.Apply(fs, alias); err != nil || *metrics != "127.0.0.1:8" {
		t.Errorf("new name and alias both set: metrics %q, %v; want the new name's 127.0.0.1:8", *metrics, err)
	}

	t.Setenv("RENDERBOX_RETENTION", "a day")
	fs, _, _, _, _, _ = flags()
	if _, err := envflag.Apply(fs, nil); err == nil || !strings.Contains(err.Error(), `RENDERBOX_RETENTION="a day": invalid value for -retention`) {
		t.Errorf("a bad value: %v, want an error naming RENDERBOX_RETENTION", err)
	}
}
