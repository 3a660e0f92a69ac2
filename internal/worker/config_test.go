package worker

import (
	"flag"
	"testing"
)

// The sandbox flags take the manager's defaults but the worker's state
// dir, and an empty value on the command line means the default, as an
// empty variable does.
func TestConfigDefaults(t *testing.T) {
	t.Setenv("RENDERBOX_STATE_DIR", "")
	t.Setenv("RENDERBOX_PLATFORM", "")
	for _, args := range [][]string{nil, {"-state-dir", "", "-platform", ""}} {
		var c Config
		fs := flag.NewFlagSet("worker check", flag.ContinueOnError)
		c.Bind(fs)
		if err := fs.Parse(append(args, "-rootfs", t.TempDir())); err != nil {
			t.Fatal(err)
		}
		if err := c.Settle(fs); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if c.Sandbox.StateDir != DefaultStateDir || c.LogLevel != "info" {
			t.Errorf("%q: got state dir %q, log level %q; want %q, info", args, c.Sandbox.StateDir, c.LogLevel, DefaultStateDir)
		}
		if f := fs.Lookup("platform"); f.DefValue != "systrap" || fs.Lookup("cgroup-parent").DefValue != "renderbox" {
			t.Errorf("got -platform default %q, -cgroup-parent %q; want the manager's: systrap, renderbox", f.DefValue, fs.Lookup("cgroup-parent").DefValue)
		}
	}
}
