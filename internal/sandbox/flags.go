package sandbox

import "flag"

// Bind registers the settings of c that an operator chooses — runsc, its
// platform and fast path, the state dir, the cgroup parent — as flags of
// fs, so a command takes them from the manager's own configuration rather
// than a copy of it. Each flag defaults to c's value, or where c leaves it
// empty to the manager's default; the caller sets Rootfs, Logger and the
// rest.
func (c *Config) Bind(fs *flag.FlagSet) {
	d := c.withDefaults()
	fs.StringVar(&c.Runsc, "runsc", c.Runsc, "runsc binary (default: $PATH, then /usr/local/bin/runsc)")
	fs.StringVar(&c.Platform, "platform", d.Platform, "runsc platform: systrap, ptrace or kvm")
	fs.BoolVar(&c.SystrapFastPath, "systrap-fast-path", d.SystrapFastPath, "let systrap spin while the Sentry and the sandboxed threads wait for each other (runsc's adaptive fast path); off: spinning sandboxes take CPU from each other on a small host")
	fs.StringVar(&c.StateDir, "state-dir", d.StateDir, "private state dir for runsc and bundles")
	fs.StringVar(&c.CgroupParent, "cgroup-parent", d.CgroupParent, `cgroup holding this worker's sandboxes ("`+DelegatedParent+`": inside the worker's own cgroup, which its unit delegates)`)
}
