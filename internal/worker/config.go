package worker

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
	"github.com/renderbox/renderbox/internal/hostcheck"
	"github.com/renderbox/renderbox/internal/rootfs"
	"github.com/renderbox/renderbox/internal/sandbox"
)

// The worker's defaults where they are not the sandbox manager's: a state
// dir of its own beside other users of /run/renderbox, and the tree
// make rootfs switches current to.
const (
	DefaultStateDir = "/run/renderbox/worker"
	DefaultRootfs   = "/var/lib/renderbox/rootfs/current"
)

// Config is the settings every worker command takes. Bind registers them
// as flags; Settle applies each flag's RENDERBOX_* variable of the same
// name (envflag), the command line winning. docs/settings.md
// lists them all.
type Config struct {
	// Sandbox is the sandboxes' settings (runsc, platform, its fast path,
	// state dir, cgroup parent), registered by sandbox.Config.Bind with
	// the manager's defaults but DefaultStateDir. A cgroup parent of
	// sandbox.DelegatedParent is the worker's own cgroup's sandboxes/,
	// for a systemd unit with Delegate=yes. Its Rootfs and RootfsImage
	// come from Rootfs and NoRootfsImage.
	Sandbox sandbox.Config
	// Rootfs is the built rootfs tree (rootfs/ + manifest.json), resolved
	// once by Settle. Default DefaultRootfs.
	Rootfs string
	// NoRootfsImage mounts the tree through the gofer even where it has
	// an image (rootfs.ImageName). Default false.
	NoRootfsImage bool
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string
	// RootfsMaxAge refuses a rootfs whose packages are older; 0 (the
	// default) only warns past hostcheck.RootfsWarnAge.
	RootfsMaxAge time.Duration

	// deprecated are the old variables Settle read, for the log to name.
	deprecated []envflag.Deprecated
}

// Bind registers the settings as flags of fs, with their defaults.
func (c *Config) Bind(fs *flag.FlagSet) {
	if c.Sandbox.StateDir == "" {
		c.Sandbox.StateDir = DefaultStateDir
	}
	c.Sandbox.Bind(fs)
	fs.StringVar(&c.Rootfs, "rootfs", DefaultRootfs, "built rootfs tree")
	fs.BoolVar(&c.NoRootfsImage, "no-rootfs-image", false, "mount the rootfs tree through the gofer even where it has an EROFS image (worker rootfs image)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&c.RootfsMaxAge, "rootfs-max-age", 0, "refuse a rootfs whose packages are older than this (0: only warn past 7 days)")
}

// deprecatedVars are variables once named otherwise than their flag,
// still read (the new name wins) and warned about.
var deprecatedVars = []envflag.Deprecated{{Var: "RENDERBOX_WORKER_METRICS", Flag: "metrics-addr"}}

// Settle applies the variables of the flags the command line (parsed into
// fs) did not give — but those in args, a command's arguments, which have
// none — then checks the settings and resolves the rootfs.
func (c *Config) Settle(fs *flag.FlagSet, args ...string) error {
	used, err := envflag.Apply(fs, deprecatedVars, args...)
	if err != nil {
		return err
	}
	c.deprecated = used
	// An empty value given on the command line means the default, as an
	// empty variable does.
	if c.Sandbox.StateDir == "" {
		c.Sandbox.StateDir = DefaultStateDir
	}
	if c.Rootfs == "" {
		c.Rootfs = DefaultRootfs
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	if err := c.validate(); err != nil {
		return err
	}
	// The rootfs is resolved once: a `make rootfs` that moves "current"
	// later does not change the tree this worker verified and runs (it
	// takes the new one when restarted; deploy/README.md).
	tree, err := filepath.EvalSymlinks(c.Rootfs)
	if err != nil {
		return fmt.Errorf("config: rootfs %s: %w", c.Rootfs, err)
	}
	c.Rootfs = tree
	return nil
}

func (c Config) validate() error {
	switch c.Sandbox.Platform {
	case "", "systrap", "ptrace", "kvm": // "": the manager's default
	default:
		return fmt.Errorf("config: platform %q is not one of systrap, ptrace, kvm", c.Sandbox.Platform)
	}
	if !filepath.IsAbs(c.Sandbox.StateDir) {
		return fmt.Errorf("config: state dir %q must be an absolute path", c.Sandbox.StateDir)
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

// WarnDeprecated logs each old variable Settle read.
func (c Config) WarnDeprecated(log *slog.Logger) {
	for _, d := range c.deprecated {
		log.Warn("a deprecated environment variable is set; rename it", "variable", d.Var, "use", d.Use())
	}
}

// Logger is the JSON logger at LogLevel on stderr.
func (c Config) Logger() *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.LogLevel))
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}

// Manager builds the sandbox manager the settings describe.
func (c Config) Manager(log *slog.Logger) (*sandbox.Manager, error) {
	sc := c.Sandbox
	if sc.CgroupParent == sandbox.DelegatedParent {
		parent, err := sandbox.Delegate()
		if err != nil {
			return nil, err
		}
		sc.CgroupParent = parent
	}
	sc.Rootfs, sc.RootfsImage, sc.Logger = rootfs.Dir(c.Rootfs), c.rootfsImage(), log
	return sandbox.NewManager(sc)
}

// rootfsImage is the tree's EROFS image, "" without one or with
// -no-rootfs-image; the start-up checks verify it before any sandbox runs.
func (c Config) rootfsImage() string {
	p := filepath.Join(c.Rootfs, rootfs.ImageName)
	if _, err := os.Stat(p); err != nil || c.NoRootfsImage {
		return ""
	}
	return p
}

// Host is what the start-up checks look at, with these settings.
func (c Config) Host(log *slog.Logger) hostcheck.Host {
	return hostcheck.Host{
		Manager: func() (*sandbox.Manager, error) { return c.Manager(log) },
		Private: func(m *sandbox.Manager) (*sandbox.Manager, func(), error) { return c.privateManager(m, log) },
		Tree:    c.Rootfs, Image: c.rootfsImage(), NoImage: c.NoRootfsImage, MaxAge: c.RootfsMaxAge,
	}
}

// Runnable is a manager after the cheap start-up checks (hostcheck's
// Runtime), for commands that run sandboxes without the full preflight.
func (c Config) Runnable(ctx context.Context, log *slog.Logger) (*sandbox.Manager, error) {
	m, err := c.Manager(log)
	if err != nil {
		return nil, err
	}
	return m, hostcheck.Runtime(ctx, m)
}

// LockOrPrivate is hostcheck.LockOrPrivate with m built from c, for a
// command that is not going to serve; cleanup removes a private state dir.
func (c Config) LockOrPrivate(m *sandbox.Manager, log *slog.Logger) (*sandbox.Manager, func(), error) {
	own, _, cleanup, err := hostcheck.LockOrPrivate(m, false /* serving */, func(m *sandbox.Manager) (*sandbox.Manager, func(), error) {
		return c.privateManager(m, log)
	})
	return own, cleanup, err
}

// privateManager is a manager on a state dir and cgroup parent of its own,
// beside m's (for checks run next to a worker that holds m's), holding its
// lock; cleanup reaps and removes both.
func (c Config) privateManager(m *sandbox.Manager, log *slog.Logger) (*sandbox.Manager, func(), error) {
	p := c
	suffix := fmt.Sprintf("-check-%d", os.Getpid())
	p.Sandbox.StateDir, p.Sandbox.CgroupParent = m.Config().StateDir+suffix, m.Config().CgroupParent+suffix
	pm, err := p.Manager(log)
	if err != nil {
		return nil, nil, err
	}
	unlock, err := pm.Lock()
	if err != nil {
		return nil, nil, err
	}
	return pm, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pm.Reap(ctx); err != nil {
			log.Warn("cleaning the private state dir", "err", err)
		}
		unlock()
		for _, d := range sandbox.ParentCgroupDirs(p.Sandbox.CgroupParent) {
			_ = os.Remove(d)
		}
		_ = sandbox.RemoveStateDir(p.Sandbox.StateDir)
	}, nil
}

// Deprecated are the old variables Settle read (WarnDeprecated logs them).
func (c Config) Deprecated() []envflag.Deprecated { return c.deprecated }
