package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/renderbox/renderbox/internal/wire"
)

// Modes a job's sandbox came from.
const (
	ModeCold      = "cold"      // created and started for the job
	ModePrebooted = "prebooted" // booted from nothing before the job
	ModeRestored  = "restored"  // restored from a checkpoint of a booted one
)

// PoolFamily configures the pool of one renderer family: sandboxes started
// ahead of any job, each with its renderer booted to an idle state, waiting
// for exactly one request. Each still serves one job and is destroyed.
type PoolFamily struct {
	// Name is the family ("chromium", "office", "light").
	Name string
	// Warm is what each sandbox's agent boots before its request.
	Warm wire.Warm
	// Limits are the sandboxes' limits. A job may take one when its own
	// limits fit: the cgroup ones (memory, CPU, pids) no higher, the ones
	// fixed in the spec (tmpfs size, rlimits) equal. The cgroup ones are
	// lowered to the job's before its request is sent.
	Limits Limits
	// Size is how many idle sandboxes are kept ready; 0 disables the pool.
	Size int
	// MemoryBudget bounds the memory the family's idle sandboxes hold, as
	// their cgroups charge it; 0 means no bound beyond Size.
	MemoryBudget int64
	// MaxIdle is how long a sandbox may wait for a job before it is
	// destroyed and replaced. Default 10 minutes.
	MaxIdle time.Duration
	// Restore fills the pool by restoring a checkpoint of one booted
	// sandbox instead of booting each.
	Restore bool
	// Images is how many checkpoint images of the family are in use at
	// once; each restore picks one of them at random. Every sandbox
	// restored from one image starts with the same memory (its layout,
	// every random state seeded before the checkpoint): a job that learns
	// one sandbox's layout knows that of about 1 in Images of the next.
	// Default DefaultImages.
	Images int
	// ImageMaxAge and ImageMaxRestores bound how long and how often one
	// image is used before it is retired and a fresh one booted and
	// taken. Each image is retired at an age drawn between half and all
	// of ImageMaxAge, so that images made together are not replaced
	// together. Defaults 10 minutes and 100 restores.
	ImageMaxAge      time.Duration
	ImageMaxRestores int
	// Settle is how long a restored sandbox waits before a job that can
	// wait takes it: gVisor restarts its clock calibration on restore,
	// and until its first update a second later every clock_gettime of
	// the renderer is a system call the Sentry serves rather than a vDSO
	// read. Worth it for a renderer that reads the clock often
	// (RestoreSettle); 0, and for booted sandboxes, ready when filled.
	Settle time.Duration
	// TemplateWait is how long a booted template runs on before it is
	// checkpointed: every sandbox restored from the image resumes what
	// the renderer was doing when it was saved, and pays for it again.
	// 0 checkpoints it as soon as it is ready.
	TemplateWait time.Duration
	// FillWait is how long a job that finds the family empty waits for a
	// fill under way (or starting) before it runs cold. Each fill that
	// lands starts the wait again, even when another job takes it: a job
	// runs cold only when the family has made nothing for FillWait. Worth
	// it where a fill is quicker and cheaper than a cold job (a restore);
	// 0 never waits.
	FillWait time.Duration
}

func (f PoolFamily) withDefaults() PoolFamily {
	if f.MaxIdle == 0 {
		f.MaxIdle = 10 * time.Minute
	}
	if f.ImageMaxAge == 0 {
		f.ImageMaxAge = 10 * time.Minute
	}
	if f.ImageMaxRestores == 0 {
		f.ImageMaxRestores = DefaultImageMaxRestores
	}
	if f.Images == 0 {
		f.Images = DefaultImages
	}
	f.Limits = f.Limits.WithDefaults()
	return f
}

// PoolEvent is something the pool did, for metrics and logs.
type PoolEvent struct {
	Family string
	// Kind is "hit", "miss", "fill", "fill_failed", "evict", "died" or
	// "image".
	Kind string
	// Mode is how a filled or taken sandbox was made (ModePrebooted or
	// ModeRestored); Reason says why a job missed or a sandbox went.
	Mode     string
	Reason   string
	Duration time.Duration
}

// PoolConfig configures a Pool.
type PoolConfig struct {
	Families []PoolFamily
	// BootTimeout bounds one sandbox's boot, from create to its Ready
	// frame. Default 60s.
	BootTimeout time.Duration
	// OnEvent, if set, is told of every event; it must not block.
	OnEvent func(PoolEvent)
}

// Pool keeps pre-booted single-use sandboxes per family and refills them in
// the background. It is part of the Manager's one lifecycle: its sandboxes
// come from the same bundle and create path as cold ones and end in the
// same Destroy.
type Pool struct {
	m    *Manager
	cfg  PoolConfig
	fams map[string]*family

	stop    context.CancelFunc
	stopped chan struct{}
	wg      sync.WaitGroup
}

type family struct {
	cfg  PoolFamily
	wake chan struct{}

	mu       sync.Mutex
	idle     []*pooled
	lastMem  int64    // memory of the last filled sandbox, for the budget
	images   []*image // in use, oldest first
	making   bool     // another image is being made in the background
	failures int      // consecutive failed fills
	wasFull  bool     // said so in the log already
	filling  bool     // a fill is under way
	// filled is closed, and replaced, when a fill ends.
	filled chan struct{}
}

type pooled struct {
	sb   *Sandbox
	mode string
	born time.Time
	// settled is when a job that can wait may take it (Settle).
	settled time.Time
	mem     int64
}

// isSettled reports whether a job that can wait may take it at now.
func (pd *pooled) isSettled(now time.Time) bool { return !now.Before(pd.settled) }

// RestoreSettle is the Settle of a restored Chromium. Measured with
// runsc --strace on a restored Chromium whose job came 0.2 s after its
// restore: 4,900 of the job's 7,700 system calls were clock_gettime
// (CLOCK_MONOTONIC), all until the Sentry logged "CalibratedClock
// (Monotonic): ready" 0.9 s after the restore, none after; a booted
// Chromium's job made a few hundred. The calibration's second sample
// comes with its updater's first tick, one second after the sandbox's
// first activity (pkg/sentry/time: ApproxUpdateInterval).
const RestoreSettle = 1200 * time.Millisecond

// TemplateWait is the TemplateWait of Chromium. A Chromium that has
// just said it is ready still starts work for seconds after (its
// template's CPU time grew in steps until ≈ 4 s after ready, then
// stayed flat), and each restored copy of an image saved at once runs
// that work again, with its clock not yet calibrated (RestoreSettle).
// Measured here as each restored sandbox's cgroup CPU time once it
// stood idle, images saved at once against 6 s after ready: a fresh
// pool, two pairs of runs, 720–926 and 718–803 ms against 573–659 and
// 645–668; one restore at a time, six each, mean 796 ms against 711.
const TemplateWait = 6 * time.Second

// DefaultImages and DefaultImageMaxRestores are the pool's defaults for
// PoolFamily.Images and ImageMaxRestores (docs/security.md, "What restored
// sandboxes share", has the figures they were chosen from).
const (
	DefaultImages           = 2
	DefaultImageMaxRestores = 100
)

// image is a checkpoint of a booted sandbox.
type image struct {
	dir      string
	key      string
	made     time.Time
	maxAge   time.Duration // drawn in [ImageMaxAge/2, ImageMaxAge]
	restores int
}

// usable reports whether img may still be restored from: it is of the
// family's current key, and young and little used enough.
func (img *image) usable(key string, maxRestores int) bool {
	return img.key == key && time.Since(img.made) < img.maxAge && img.restores < maxRestores
}

// NewPool returns a pool over m's sandboxes. Start fills it.
func (m *Manager) NewPool(cfg PoolConfig) (*Pool, error) {
	if cfg.BootTimeout == 0 {
		cfg.BootTimeout = 60 * time.Second
	}
	p := &Pool{m: m, cfg: cfg, fams: map[string]*family{}, stopped: make(chan struct{})}
	for _, f := range cfg.Families {
		f = f.withDefaults()
		if f.Name == "" || p.fams[f.Name] != nil {
			return nil, fmt.Errorf("pool config: family name %q is empty or repeated", f.Name)
		}
		if f.Size < 0 {
			return nil, fmt.Errorf("pool config: family %s: size %d is negative", f.Name, f.Size)
		}
		if f.Images < 0 || f.ImageMaxRestores < 0 || f.ImageMaxAge < 0 {
			return nil, fmt.Errorf("pool config: family %s: images %d, image max restores %d and max age %s may not be negative",
				f.Name, f.Images, f.ImageMaxRestores, f.ImageMaxAge)
		}
		p.fams[f.Name] = &family{cfg: f, wake: make(chan struct{}, 1), filled: make(chan struct{})}
	}
	return p, nil
}

func (p *Pool) event(e PoolEvent) {
	if p.cfg.OnEvent != nil {
		p.cfg.OnEvent(e)
	}
}

// Start fills every family in the background until Close.
func (p *Pool) Start(ctx context.Context) {
	ctx, p.stop = context.WithCancel(ctx)
	for _, f := range p.fams {
		if f.cfg.Size == 0 {
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.refill(ctx, f)
		}()
	}
}

// Close stops refilling and destroys every idle sandbox and image.
func (p *Pool) Close(ctx context.Context) error {
	if p.stop != nil {
		p.stop()
	}
	p.wg.Wait()
	var errs []error
	for _, f := range p.fams {
		f.mu.Lock()
		idle, imgs := f.idle, f.images
		f.idle, f.images = nil, nil
		f.mu.Unlock()
		for _, pd := range idle {
			errs = append(errs, pd.sb.Destroy(ctx))
		}
		for _, img := range imgs {
			errs = append(errs, os.RemoveAll(img.dir))
		}
	}
	return errors.Join(errs...)
}

// fits reports whether a job with limits lim may run in a sandbox created
// with pool: what the spec fixes must be equal, what the cgroup holds no
// higher. RLIMIT_NPROC may be lower where the renderer starts with the job
// (the agent applies the request's); a pre-booted one started with the
// pool's.
func fits(lim, pool Limits, prebooted bool) string {
	switch {
	case lim.TmpBytes != pool.TmpBytes || lim.NoFile != pool.NoFile:
		return "spec_limits"
	case lim.NProc > pool.NProc || prebooted && lim.NProc != pool.NProc:
		return "spec_limits"
	case lim.MemoryBytes > pool.MemoryBytes || lim.CPUs > pool.CPUs || lim.Pids > pool.Pids:
		return "higher_limits"
	}
	return ""
}

// Serves reports whether the pool keeps sandboxes of family name.
func (p *Pool) Serves(name string) bool {
	if p == nil {
		return false
	}
	f := p.fams[name]
	return f != nil && f.cfg.Size > 0
}

// Take returns an idle sandbox of the family for a job with limits lim,
// its cgroup limits lowered to lim's, and how it was made; nil when the
// family has none ready (the caller then runs the job cold). The sandbox
// is the caller's: RunIn serves the job in it and destroys it.
func (p *Pool) Take(ctx context.Context, name string, lim Limits) (*Sandbox, string) {
	if p == nil {
		return nil, ""
	}
	f := p.fams[name]
	if f == nil || f.cfg.Size == 0 {
		return nil, ""
	}
	lim = lim.WithDefaults()
	// A program started ahead (WarmExec) that the job's RLIMIT_NPROC does
	// not match is not used: the agent starts the job's own.
	booted := f.cfg.Warm.Kind != wire.WarmNone && f.cfg.Warm.Kind != wire.WarmExec
	if why := fits(lim, f.cfg.Limits, booted); why != "" {
		p.event(PoolEvent{Family: name, Kind: "miss", Reason: why})
		return nil, ""
	}
	defer f.poke()
	var patience *time.Timer
	if f.cfg.FillWait > 0 {
		patience = time.NewTimer(f.cfg.FillWait)
		defer patience.Stop()
	}
	waiting := patience != nil
	for {
		f.mu.Lock()
		// Nothing settled is ready, and a sandbox is settling or a fill is
		// under way or about to start (the refill loop is not backing off
		// after failures). The oldest sandbox settles first.
		if waiting && (len(f.idle) == 0 || !f.idle[0].isSettled(time.Now())) &&
			(len(f.idle) > 0 || f.filling || f.failures == 0) {
			filled := f.filled
			// nil while nothing is settling: only a fill ends the wait.
			// (A timer nobody references is collected, stopped or not.)
			var settle <-chan time.Time
			if len(f.idle) > 0 {
				settle = time.After(time.Until(f.idle[0].settled))
			}
			f.mu.Unlock()
			f.poke()
			select {
			case <-settle:
				continue
			case <-filled:
				// The family is making sandboxes: whoever takes this one,
				// the next is worth as long a wait. Under load jobs queue
				// for fills; a cold job instead (a Chromium boot: seconds
				// and several CPU-seconds) would slow every fill behind it.
				patience.Reset(f.cfg.FillWait)
				continue
			case <-patience.C:
				// A sandbox still settling beats a cold one.
				waiting = false
			case <-ctx.Done():
				waiting = false
			}
			f.mu.Lock()
		}
		if len(f.idle) == 0 {
			f.mu.Unlock()
			p.event(PoolEvent{Family: name, Kind: "miss", Reason: "empty"})
			return nil, ""
		}
		pd := f.idle[0]
		f.idle = f.idle[1:]
		f.mu.Unlock()
		if !pd.sb.alive() {
			p.discard(ctx, f, pd, "died")
			continue
		}
		if lim != f.cfg.Limits {
			if err := lowerCgroup(pd.sb.cgroup, lim, p.m.noSwap); err != nil {
				p.m.log.Warn("pool: lowering a sandbox's limits failed; destroying it", "family", name, "sandbox_id", pd.sb.ID, "err", err)
				p.discard(ctx, f, pd, "lower_failed")
				continue
			}
		}
		pd.sb.Limits = lim
		pd.sb.rendered = p.m.rendering() // ended by RunIn's render, or Destroy
		p.event(PoolEvent{Family: name, Kind: "hit", Mode: pd.mode, Duration: time.Since(pd.born)})
		return pd.sb, pd.mode
	}
}

func (f *family) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// discard destroys an idle sandbox that will serve no job.
func (p *Pool) discard(ctx context.Context, f *family, pd *pooled, why string) {
	p.event(PoolEvent{Family: f.cfg.Name, Kind: map[bool]string{true: "died", false: "evict"}[why == "died"], Reason: why})
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := pd.sb.Destroy(dctx); err != nil {
		p.m.log.Warn("pool: destroying a sandbox", "family", f.cfg.Name, "sandbox_id", pd.sb.ID, "err", err)
	}
}

// Idle returns how many sandboxes of the family are ready.
func (p *Pool) Idle(name string) int {
	f := p.fams[name]
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.idle)
}

// FamilyStats is a snapshot of one family, for gauges.
type FamilyStats struct {
	Name       string
	Size, Idle int
	IdleMemory int64
	// Images is how many checkpoint images are in use; ImageAge is the
	// age of the oldest, 0 without one.
	Images   int
	ImageAge time.Duration
}

// Stats returns a snapshot of every family.
func (p *Pool) Stats() []FamilyStats {
	var out []FamilyStats
	for _, f := range p.fams {
		f.mu.Lock()
		s := FamilyStats{Name: f.cfg.Name, Size: f.cfg.Size, Idle: len(f.idle)}
		for _, pd := range f.idle {
			s.IdleMemory += pd.mem
		}
		s.Images = len(f.images)
		if len(f.images) > 0 {
			s.ImageAge = time.Since(f.images[0].made)
		}
		f.mu.Unlock()
		out = append(out, s)
	}
	return out
}

// refill keeps the family at its size, one sandbox at a time (boots compete
// with jobs for the same cores), evicts the ones idle too long or dead, and
// backs off after failures.
func (p *Pool) refill(ctx context.Context, f *family) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		p.sweep(ctx, f)
		for ctx.Err() == nil && f.wants() {
			if err := p.fill(ctx, f); err != nil {
				if ctx.Err() != nil {
					return
				}
				f.mu.Lock()
				f.failures++
				n := f.failures
				f.mu.Unlock()
				p.m.log.Warn("pool: filling failed", "family", f.cfg.Name, "failures", n, "err", err)
				p.event(PoolEvent{Family: f.cfg.Name, Kind: "fill_failed", Reason: err.Error()})
				// 1s, 2s, 4s … at most a minute between tries.
				backoff := min(time.Minute, time.Second<<min(n-1, 6))
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				continue
			}
			f.mu.Lock()
			f.failures = 0
			f.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		case <-tick.C:
		}
	}
}

// wants reports whether the family is below its size and its budget.
func (f *family) wants() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.idle) >= f.cfg.Size {
		return false
	}
	if f.cfg.MemoryBudget > 0 {
		var mem int64
		for _, pd := range f.idle {
			mem += pd.mem
		}
		if mem+f.lastMem > f.cfg.MemoryBudget {
			return false
		}
	}
	return true
}

// sweep destroys idle sandboxes that died or waited longer than MaxIdle.
func (p *Pool) sweep(ctx context.Context, f *family) {
	f.mu.Lock()
	var keep, drop []*pooled
	for _, pd := range f.idle {
		if !pd.sb.alive() || time.Since(pd.born) > f.cfg.MaxIdle {
			drop = append(drop, pd)
		} else {
			keep = append(keep, pd)
		}
	}
	f.idle = keep
	f.mu.Unlock()
	for _, pd := range drop {
		why := "max_idle"
		if !pd.sb.alive() {
			why = "died"
			p.m.log.Warn("pool: an idle sandbox died; replacing it", "family", f.cfg.Name, "sandbox_id", pd.sb.ID, "stderr", tailOf(pd.sb.Stderr(), 512))
		}
		p.discard(ctx, f, pd, why)
	}
}

// fill adds one sandbox to the family.
func (p *Pool) fill(ctx context.Context, f *family) error {
	t := time.Now()
	f.mu.Lock()
	f.filling = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.filling = false
		close(f.filled)
		f.filled = make(chan struct{})
		f.mu.Unlock()
	}()
	// Out of the way of jobs rendering, while the family can wait.
	p.awaitQuiet(ctx, f)
	var sb *Sandbox
	var err error
	mode := ModePrebooted
	if f.cfg.Restore {
		mode = ModeRestored
		sb, err = p.restoreOne(ctx, f)
	} else {
		sb, err = p.bootOne(ctx, f.cfg)
	}
	if err != nil {
		return err
	}
	pd := &pooled{sb: sb, mode: mode, born: time.Now(), mem: memoryUsage(sb.cgroup)}
	pd.settled = pd.born
	if mode == ModeRestored {
		pd.settled = pd.born.Add(f.cfg.Settle)
	}
	f.mu.Lock()
	f.idle = append(f.idle, pd)
	f.lastMem = pd.mem
	full := len(f.idle) >= f.cfg.Size && !f.wasFull
	f.wasFull = f.wasFull || full
	f.mu.Unlock()
	if full {
		// Once per family: operators and tests learn when it is warm.
		p.m.log.Info("pool: family full", "family", f.cfg.Name, "idle", f.cfg.Size, "mode", mode, "idle_memory_bytes", pd.mem)
	}
	p.event(PoolEvent{Family: f.cfg.Name, Kind: "fill", Mode: mode, Duration: time.Since(t)})
	return nil
}

// warmArgs is the agent's argv in a pool sandbox.
func warmArgs(w wire.Warm) ([]string, error) {
	b, err := json.Marshal(w)
	if err != nil {
		return nil, err
	}
	return []string{AgentPath, wire.WarmArg, string(b)}, nil
}

// bootOne creates and starts a sandbox whose agent boots the family's
// renderer, and waits for its Ready frame.
func (p *Pool) bootOne(ctx context.Context, fc PoolFamily) (sb *Sandbox, err error) {
	args, err := warmArgs(fc.Warm)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.BootTimeout)
	defer cancel()
	sb, err = p.m.prepare(ctx, fc.Limits, args, true)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer dcancel()
			err = errors.Join(err, sb.Destroy(dctx))
		}
	}()
	if err := sb.Start(ctx); err != nil {
		return sb, fmt.Errorf("starting pool sandbox: %w", err)
	}
	type ready struct {
		rd  *wire.Ready
		err error
	}
	ch := make(chan ready, 1)
	go func() {
		rd, err := wire.ReadReady(sb.stdout)
		ch <- ready{rd, err}
	}()
	select {
	case <-ctx.Done():
		return sb, fmt.Errorf("booting %s: no ready frame within %g s", fc.Name, p.cfg.BootTimeout.Seconds())
	case r := <-ch:
		if r.err != nil {
			return sb, fmt.Errorf("booting %s: %w (stderr: %s)", fc.Name, r.err, tailOf(sb.Stderr(), 512))
		}
		if r.rd.Error != "" {
			return sb, fmt.Errorf("booting %s: the agent says: %s", fc.Name, r.rd.Error)
		}
	}
	return sb, nil
}

// imageKey names what a checkpoint image depends on: the rootfs (and its
// EROFS image, if the sandboxes mount one), the runsc
// binary, the family's boot and its spec limits. A change to any of them
// makes the image stale.
func (p *Pool) imageKey(fc PoolFamily) string {
	h := sha256.New()
	for _, path := range []string{p.m.runsc.Path, filepath.Join(filepath.Dir(p.m.cfg.Rootfs), "manifest.json"), p.m.cfg.RootfsImage} {
		if path == "" {
			continue
		}
		if st, err := os.Stat(path); err == nil {
			fmt.Fprintf(h, "%s %d %d\n", path, st.Size(), st.ModTime().UnixNano())
		}
	}
	_ = json.NewEncoder(h).Encode(struct {
		Warm   wire.Warm
		Limits Limits
		Rootfs string
		Image  string
	}{fc.Warm, fc.Limits, p.m.cfg.Rootfs, p.m.cfg.RootfsImage})
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// pickImage returns a checkpoint image of the family to restore from. It
// retires the images that are stale, past their age or restore count, and
// picks one of the others at random. With none left it makes one (booting
// and checkpointing a template sandbox) and returns it; with fewer than
// Images it starts making one in the background, so that restores go on
// from the others meanwhile. Fills run one at a time per family: nothing
// restores from a retired image any more.
func (p *Pool) pickImage(ctx context.Context, f *family) (*image, error) {
	key := p.imageKey(f.cfg)
	f.mu.Lock()
	var live, retired []*image
	for _, img := range f.images {
		if img.usable(key, f.cfg.ImageMaxRestores) {
			live = append(live, img)
		} else {
			retired = append(retired, img)
		}
	}
	f.images = live
	another := len(live) > 0 && len(live) < f.cfg.Images && !f.making
	f.making = f.making || another
	f.mu.Unlock()
	for _, img := range retired {
		os.RemoveAll(img.dir)
	}
	if len(live) == 0 {
		return p.makeImage(ctx, f, key)
	}
	if another {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.awaitQuiet(ctx, f)
			if _, err := p.makeImage(ctx, f, key); err != nil && ctx.Err() == nil {
				p.m.log.Warn("pool: making another checkpoint image failed", "family", f.cfg.Name, "err", err)
			}
			f.mu.Lock()
			f.making = false
			f.mu.Unlock()
		}()
	}
	return live[mrand.IntN(len(live))], nil
}

// makeImage boots a template sandbox, checkpoints it into a fresh image of
// the family and puts the image in use.
func (p *Pool) makeImage(ctx context.Context, f *family, key string) (*image, error) {
	t := time.Now()
	tpl, err := p.bootOne(ctx, f.cfg)
	if err != nil {
		return nil, fmt.Errorf("booting the template: %w", err)
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	dir := filepath.Join(p.m.cfg.StateDir, "images", f.cfg.Name+"-"+key+"-"+newID())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, errors.Join(err, tpl.Destroy(dctx))
	}
	if f.cfg.TemplateWait > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(f.cfg.TemplateWait):
		}
	}
	err = p.m.runsc.Checkpoint(ctx, tpl.ID, CheckpointOpts{ImagePath: dir, ExcludeZeroPages: true})
	if derr := tpl.Destroy(dctx); err == nil && derr != nil {
		p.m.log.Warn("pool: destroying the template", "family", f.cfg.Name, "err", derr)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("checkpointing the template: %w", err)
	}
	maxAge := f.cfg.ImageMaxAge/2 + mrand.N(f.cfg.ImageMaxAge/2+1)
	next := &image{dir: dir, key: key, made: time.Now(), maxAge: maxAge}
	f.mu.Lock()
	f.images = append(f.images, next)
	f.mu.Unlock()
	p.event(PoolEvent{Family: f.cfg.Name, Kind: "image", Duration: time.Since(t)})
	p.m.log.Info("pool: checkpoint image made", "family", f.cfg.Name, "key", key,
		"duration_seconds", time.Since(t).Seconds(), "retires_after_seconds", maxAge.Seconds())
	return next, nil
}

// restoreOne creates a sandbox with fresh stdio and restores the family's
// checkpoint into it.
func (p *Pool) restoreOne(ctx context.Context, f *family) (sb *Sandbox, err error) {
	img, err := p.pickImage(ctx, f)
	if err != nil {
		return nil, err
	}
	args, err := warmArgs(f.cfg.Warm)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.BootTimeout)
	defer cancel()
	// No create: restore makes the container itself, one runsc run fewer.
	sb, err = p.m.prepare(ctx, f.cfg.Limits, args, false)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	img.restores++
	f.mu.Unlock()
	if err := sb.restore(ctx, img.dir); err != nil {
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer dcancel()
		// A broken image is not used again.
		f.mu.Lock()
		if i := slices.Index(f.images, img); i >= 0 {
			f.images = slices.Delete(f.images, i, i+1)
			os.RemoveAll(img.dir)
		}
		f.mu.Unlock()
		return nil, errors.Join(fmt.Errorf("restoring %s: %w", f.cfg.Name, err), sb.Destroy(dctx))
	}
	return sb, nil
}
