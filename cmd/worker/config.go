package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/renderbox/renderbox/internal/envflag"
	"github.com/renderbox/renderbox/internal/rootfs"
	"github.com/renderbox/renderbox/internal/sandbox"
)

// Config is the worker's configuration. Flags map onto it in bind, and
// each flag's RENDERBOX_* variable of the same name (envflag) in parse;
// flags win. The README's "Settings" table lists them all.
type Config struct {
	// Runsc is the runsc binary. Default: $PATH, then /usr/local/bin/runsc.
	// Env RENDERBOX_RUNSC.
	Runsc string
	// Platform is runsc's --platform. Default systrap. Env RENDERBOX_PLATFORM.
	Platform string
	// SystrapFastPath is sandbox.Config's. Default off. Env
	// RENDERBOX_SYSTRAP_FAST_PATH.
	SystrapFastPath bool
	// StateDir holds runsc state and bundles; private to this worker.
	// Default /run/renderbox/worker. Env RENDERBOX_STATE_DIR.
	StateDir string
	// Rootfs is the built rootfs tree (rootfs/ + manifest.json). Default
	// /var/lib/renderbox/rootfs/current. Env RENDERBOX_ROOTFS.
	Rootfs string
	// NoRootfsImage mounts the tree through the gofer even where it has
	// an image (rootfs.ImageName). Default false. Env
	// RENDERBOX_NO_ROOTFS_IMAGE.
	NoRootfsImage bool
	// CgroupParent is the cgroup holding this worker's sandboxes; private
	// to it. Default renderbox; "delegated" is <the worker's own
	// cgroup>/sandboxes, for a systemd unit with Delegate=yes. Env
	// RENDERBOX_CGROUP_PARENT.
	CgroupParent string
	// LogLevel is debug, info, warn or error. Default info. Env
	// RENDERBOX_LOG_LEVEL.
	LogLevel string
	// RootfsMaxAge refuses a rootfs whose packages are older; 0 (the
	// default) only warns past a week. Env RENDERBOX_ROOTFS_MAX_AGE.
	RootfsMaxAge time.Duration

	// deprecated are the old variables parse read, for the log to name.
	deprecated []envflag.Deprecated
}

func (c Config) withDefaults() Config {
	if c.Platform == "" {
		c.Platform = "systrap"
	}
	if c.StateDir == "" {
		c.StateDir = "/run/renderbox/worker"
	}
	if c.Rootfs == "" {
		c.Rootfs = "/var/lib/renderbox/rootfs/current"
	}
	if c.CgroupParent == "" {
		c.CgroupParent = "renderbox"
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	return c
}

func (c Config) validate() error {
	switch c.Platform {
	case "systrap", "ptrace", "kvm":
	default:
		return fmt.Errorf("config: platform %q is not one of systrap, ptrace, kvm", c.Platform)
	}
	if !filepath.IsAbs(c.StateDir) {
		return fmt.Errorf("config: state dir %q must be an absolute path", c.StateDir)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("config: log level %q: use debug, info, warn or error", c.LogLevel)
	}
	if _, err := os.Stat(c.Rootfs); err != nil {
		return fmt.Errorf("config: rootfs %s: %w (build it with: make rootfs)", c.Rootfs, errors.Unwrap(err))
	}
	return nil
}

// bind registers the flags shared by every subcommand; parse then applies
// their RENDERBOX_* variables (envflag), the command line winning.
func (c *Config) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.Runsc, "runsc", "", "runsc binary (default: $PATH, then /usr/local/bin/runsc)")
	fs.StringVar(&c.Platform, "platform", "", "runsc platform (default systrap)")
	fs.BoolVar(&c.SystrapFastPath, "systrap-fast-path", false, "let systrap spin while the Sentry and the sandboxed threads wait for each other (runsc's adaptive fast path); off: spinning sandboxes take CPU from each other on a small host")
	fs.StringVar(&c.StateDir, "state-dir", "", "private state dir for runsc and bundles (default /run/renderbox/worker)")
	fs.StringVar(&c.Rootfs, "rootfs", "", "built rootfs tree (default /var/lib/renderbox/rootfs/current)")
	fs.BoolVar(&c.NoRootfsImage, "no-rootfs-image", false, "mount the rootfs tree through the gofer even where it has an EROFS image (worker rootfs image)")
	fs.StringVar(&c.CgroupParent, "cgroup-parent", "", "cgroup holding this worker's sandboxes (default renderbox; \"delegated\": inside the worker's own cgroup, which its unit delegates)")
	fs.StringVar(&c.LogLevel, "log-level", "", "debug, info, warn or error (default info)")
	fs.DurationVar(&c.RootfsMaxAge, "rootfs-max-age", 0, "refuse a rootfs whose packages are older than this (0: only warn past 7 days)")
}

func (c Config) logger() *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.LogLevel))
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}

// manager builds the sandbox manager the config describes.
func (c Config) manager(log *slog.Logger) (*sandbox.Manager, error) {
	parent, err := c.cgroupParent()
	if err != nil {
		return nil, err
	}
	return sandbox.NewManager(sandbox.Config{
		Runsc:           c.Runsc,
		Platform:        c.Platform,
		SystrapFastPath: c.SystrapFastPath,
		StateDir:        c.StateDir,
		Rootfs:          rootfs.Dir(c.Rootfs),
		RootfsImage:     c.rootfsImage(),
		CgroupParent:    parent,
		Logger:          log,
	})
}

// rootfsImage is the tree's EROFS image, "" without one or with
// -no-rootfs-image; preflight verifies it before any sandbox runs.
func (c Config) rootfsImage() string {
	p := filepath.Join(c.Rootfs, rootfs.ImageName)
	if _, err := os.Stat(p); err != nil || c.NoRootfsImage {
		return ""
	}
	return p
}

// cgroupParent is the cgroup parent of the worker's sandboxes, the
// delegated one resolved (and, on cgroup v2, prepared).
func (c Config) cgroupParent() (string, error) {
	if c.CgroupParent == sandbox.DelegatedParent {
		return sandbox.Delegate()
	}
	return c.CgroupParent, nil
}

// lockOrPrivate takes the state dir's lock for m and returns m. Beside a
// running worker that holds it (busy) a caller that is not going to serve
// gets instead a manager on a private state dir (privateManager), which
// cleanup removes; one that is going to serve gets the *BusyError.
func (c Config) lockOrPrivate(m *sandbox.Manager, serving bool, log *slog.Logger) (own *sandbox.Manager, busy *sandbox.BusyError, cleanup func(), err error) {
	cleanup = func() {}
	if _, err = m.Lock(); errors.As(err, &busy) && !serving {
		own, cleanup, err = c.privateManager(log)
		if err != nil {
			cleanup = func() {}
		}
		return own, busy, cleanup, err
	}
	return m, nil, cleanup, err
}

// privateManager is a manager on a state dir and cgroup parent of its own,
// beside c's (for checks run next to a worker that holds c's), holding its
// lock; cleanup reaps and removes both.
func (c Config) privateManager(log *slog.Logger) (*sandbox.Manager, func(), error) {
	parent, err := c.cgroupParent()
	if err != nil {
		return nil, nil, err
	}
	p := c
	suffix := fmt.Sprintf("-check-%d", os.Getpid())
	p.StateDir, p.CgroupParent = c.StateDir+suffix, parent+suffix
	m, err := p.manager(log)
	if err != nil {
		return nil, nil, err
	}
	unlock, err := m.Lock()
	if err != nil {
		return nil, nil, err
	}
	return m, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := m.Reap(ctx); err != nil {
			log.Warn("cleaning the private state dir", "err", err)
		}
		unlock()
		for _, d := range sandbox.ParentCgroupDirs(p.CgroupParent) {
			_ = os.Remove(d)
		}
		_ = sandbox.RemoveStateDir(p.StateDir)
	}, nil
}

// runnableManager is a manager after the cheap start-up checks (runsc
// version, cgroups, swap), for commands that run sandboxes without the full
// preflight.
func (c Config) runnableManager(ctx context.Context) (*sandbox.Manager, error) {
	m, err := c.manager(c.logger())
	if err != nil {
		return nil, err
	}
	if _, err := sandbox.CheckVersion(ctx, m.Runsc().Path); err != nil {
		return nil, err
	}
	if err := sandbox.CheckCgroups(); err != nil {
		return nil, err
	}
	if _, _, err := sandbox.CheckSwap(); err != nil {
		return nil, err
	}
	return m, nil
}
