package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/renderbox/renderbox/internal/jobspec"
	"github.com/renderbox/renderbox/internal/wire"
)

// Modes a job's sandbox came from.
const (
	ModeCold      = jobspec.ModeCold
	ModePrebooted = jobspec.ModePrebooted
	ModeRestored  = jobspec.ModeRestored
	// The unsafe benchmark floor's (Manager.UseUnsafeNative): a native
	// process booted ahead, or made for the job.
	ModeNativeWarm = jobspec.ModeNativeWarm
	ModeNativeCold = jobspec.ModeNativeCold
)

// PoolFamily configures the pool of one renderer family (jobspec.Family:
// the catalogue describes its families without linking this package).
type PoolFamily = jobspec.Family

func familyDefaults(f PoolFamily) PoolFamily {
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
	Kind   PoolEventKind
	// Mode is how a filled or taken sandbox was made (ModePrebooted or
	// ModeRestored). Reason says why a job missed (Miss* constants), why a
	// sandbox went (Gone* constants), or, for PoolFillFailed, the error.
	Mode     string
	Reason   string
	Duration time.Duration
}

// PoolEventKind is what a PoolEvent says happened. The values are the
// metrics' label values (renderbox_pool_jobs_total's result,
// renderbox_pool_events_total's event).
type PoolEventKind string

// The kinds of PoolEvent.
const (
	PoolHit        PoolEventKind = "hit"         // a job took a sandbox
	PoolMiss       PoolEventKind = "miss"        // a job found none it could take
	PoolFill       PoolEventKind = "fill"        // a sandbox was made and is idle
	PoolFillFailed PoolEventKind = "fill_failed" // making one failed
	PoolEvict      PoolEventKind = "evict"       // an idle one was destroyed
	PoolDied       PoolEventKind = "died"        // an idle one was found dead
	PoolImage      PoolEventKind = "image"       // a checkpoint image was made
	PoolGrow       PoolEventKind = "grow"        // a job found the family empty: it keeps one more
	PoolShrink     PoolEventKind = "shrink"      // one it grew by waited out MaxIdle: it keeps one fewer
)

// growthFactor bounds how far demand grows a family past its size (and
// never past maxTarget); its memory budget bounds it too (wants).
const (
	growthFactor = 4
	maxTarget    = 64
)

// Reasons of PoolMiss, PoolEvict and PoolDied events.
const (
	MissEmpty        = "empty"         // the family had none ready
	MissSpecLimits   = "spec_limits"   // the job's tmpfs or rlimits differ
	MissHigherLimits = "higher_limits" // the job needs higher cgroup limits
	GoneDied         = "died"          // it ended while idle
	GoneMaxIdle      = "max_idle"      // it waited longer than MaxIdle
	GoneLowerFailed  = "lower_failed"  // lowering its limits to a job's failed
)

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
	// target is how many idle sandboxes the family keeps now: its Size,
	// grown by one each time a job finds it empty, shrunk by one each
	// time a sandbox waits out MaxIdle, never below Size (demand).
	target  int
	wasFull bool // said so in the log already
	filling bool // a fill is under way
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

// NewPool returns a pool over m's sandboxes. Start fills it.
func (m *Manager) NewPool(cfg PoolConfig) (*Pool, error) {
	if cfg.BootTimeout == 0 {
		cfg.BootTimeout = 60 * time.Second
	}
	p := &Pool{m: m, cfg: cfg, fams: map[string]*family{}, stopped: make(chan struct{})}
	for _, f := range cfg.Families {
		f = familyDefaults(f)
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
		p.fams[f.Name] = &family{cfg: f, target: f.Size, wake: make(chan struct{}, 1), filled: make(chan struct{})}
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
		return MissSpecLimits
	case lim.NProc > pool.NProc || prebooted && lim.NProc != pool.NProc:
		return MissSpecLimits
	case lim.MemoryBytes > pool.MemoryBytes || lim.CPUs > pool.CPUs || lim.Pids > pool.Pids:
		return MissHigherLimits
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
		p.event(PoolEvent{Family: name, Kind: PoolMiss, Reason: why})
		return nil, ""
	}
	defer f.poke()
	var patience *time.Timer
	if f.cfg.FillWait > 0 {
		patience = time.NewTimer(f.cfg.FillWait)
		defer patience.Stop()
	}
	waiting := patience != nil
	f.growIfEmpty(p)
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
			p.event(PoolEvent{Family: name, Kind: PoolMiss, Reason: MissEmpty})
			return nil, ""
		}
		pd := f.idle[0]
		f.idle = f.idle[1:]
		f.mu.Unlock()
		if !pd.sb.Alive() {
			p.discard(ctx, f, pd, GoneDied)
			continue
		}
		// Only the cgroup's limits differ from the family's (fits).
		if c := f.cfg.Limits; lim.MemoryBytes != c.MemoryBytes || lim.CPUs != c.CPUs || lim.Pids != c.Pids {
			if err := pd.sb.Lower(lim); err != nil {
				p.m.Logger().Warn("pool: lowering a sandbox's limits failed; destroying it", "family", name, "sandbox_id", pd.sb.ID, "err", err)
				p.discard(ctx, f, pd, GoneLowerFailed)
				continue
			}
		}
		pd.sb.Limits = lim
		pd.sb.CountRender(p.m.Gate()) // ended by RunIn's render, or Destroy
		p.event(PoolEvent{Family: name, Kind: PoolHit, Mode: pd.mode, Duration: time.Since(pd.born)})
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
	kind := PoolEvict
	if why == GoneDied {
		kind = PoolDied
	}
	p.event(PoolEvent{Family: f.cfg.Name, Kind: kind, Reason: why})
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := pd.sb.Destroy(dctx); err != nil {
		p.m.Logger().Warn("pool: destroying a sandbox", "family", f.cfg.Name, "sandbox_id", pd.sb.ID, "err", err)
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
	Name string
	// Size is the operator's; Target the idle sandboxes the family keeps
	// now, Size grown by demand.
	Size, Target, Idle int
	IdleMemory         int64
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
		s := FamilyStats{Name: f.cfg.Name, Size: f.cfg.Size, Target: f.target, Idle: len(f.idle)}
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
