package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/renderbox/renderbox/internal/wire"
)

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
				p.m.Logger().Warn("pool: filling failed", "family", f.cfg.Name, "failures", n, "err", err)
				p.event(PoolEvent{Family: f.cfg.Name, Kind: PoolFillFailed, Reason: err.Error()})
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
	if len(f.idle) >= f.target {
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

// reserve is how many ready sandboxes a family keeps before its fills stop
// yielding to jobs: half its target, rounded up (so a family of one always
// refills at once). Called with f.mu held.
func (f *family) reserve() int { return (f.target + 1) / 2 }

// growIfEmpty keeps one more sandbox when a job finds none idle: demand
// above what the family keeps. At most growthFactor times its size (and
// maxTarget), and no more than its memory budget holds at the last
// sandbox's size.
func (f *family) growIfEmpty(p *Pool) {
	f.mu.Lock()
	most := min(maxTarget, growthFactor*f.cfg.Size)
	if f.cfg.MemoryBudget > 0 && f.lastMem > 0 {
		most = min(most, max(f.cfg.Size, int(f.cfg.MemoryBudget/f.lastMem)))
	}
	grew := len(f.idle) == 0 && f.target < most
	if grew {
		f.target++
	}
	f.mu.Unlock()
	if grew {
		p.event(PoolEvent{Family: f.cfg.Name, Kind: PoolGrow, Reason: MissEmpty})
	}
}

// yielding reports whether the family's fills should give way to jobs now
// (Gate.Await): whether it holds its reserve of settled sandboxes. One
// still settling does not count: a job would wait for it, and the cores
// the fill left to the renders would stand idle. Below its reserve a
// family fills regardless: the next jobs need the sandboxes more than
// this one needs the cores (docs/pool.md, "The gate").
func (f *family) yielding() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	now, n := time.Now(), 0
	for _, pd := range f.idle {
		if pd.isSettled(now) {
			n++
		}
	}
	return n >= f.reserve()
}

// sweep destroys idle sandboxes that died or waited longer than MaxIdle.
func (p *Pool) sweep(ctx context.Context, f *family) {
	f.mu.Lock()
	var keep, drop []*pooled
	for _, pd := range f.idle {
		if !pd.sb.Alive() || time.Since(pd.born) > f.cfg.MaxIdle {
			drop = append(drop, pd)
		} else {
			keep = append(keep, pd)
		}
	}
	f.idle = keep
	// Each sandbox that waited out MaxIdle is demand the family no longer
	// has: it keeps one fewer, down to its size.
	shrunk := 0
	for _, pd := range drop {
		if pd.sb.Alive() && f.target > f.cfg.Size {
			f.target--
			shrunk++
		}
	}
	f.mu.Unlock()
	for range shrunk {
		p.event(PoolEvent{Family: f.cfg.Name, Kind: PoolShrink, Reason: GoneMaxIdle})
	}
	for _, pd := range drop {
		why := GoneMaxIdle
		if !pd.sb.Alive() {
			why = GoneDied
			p.m.Logger().Warn("pool: an idle sandbox died; replacing it", "family", f.cfg.Name, "sandbox_id", pd.sb.ID, "stderr", tailOf(pd.sb.Stderr(), 512))
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
	p.m.Gate().Await(ctx, f.yielding)
	var sb *Sandbox
	var err error
	mode := ModePrebooted
	if p.m.Native() {
		// Booted, as the floor a warm sandbox is measured against
		// (native.go): a native process has no checkpoint.
		mode = ModeNativeWarm
		sb, err = p.bootOne(ctx, f.cfg)
	} else if f.cfg.Restore {
		mode = ModeRestored
		sb, err = p.restoreOne(ctx, f)
	} else {
		sb, err = p.bootOne(ctx, f.cfg)
	}
	if err != nil {
		return err
	}
	pd := &pooled{sb: sb, mode: mode, born: time.Now(), mem: sb.MemoryUsage()}
	pd.settled = pd.born
	if mode == ModeRestored {
		pd.settled = pd.born.Add(f.cfg.Settle)
	}
	f.mu.Lock()
	f.idle = append(f.idle, pd)
	f.lastMem = pd.mem
	full := len(f.idle) >= f.target && !f.wasFull
	f.wasFull = f.wasFull || full
	f.mu.Unlock()
	if full {
		// Once per family: operators and tests learn when it is warm.
		p.m.Logger().Info("pool: family full", "family", f.cfg.Name, "idle", f.cfg.Size, "mode", mode, "idle_memory_bytes", pd.mem)
	}
	p.event(PoolEvent{Family: f.cfg.Name, Kind: PoolFill, Mode: mode, Duration: time.Since(t)})
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
	sb, err = p.m.NewSandbox(fc.Limits, args)
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
	if err := sb.Create(ctx); err != nil {
		return sb, fmt.Errorf("creating sandbox %s: %w", sb.ID, err)
	}
	if err := sb.Start(ctx); err != nil {
		return sb, fmt.Errorf("starting pool sandbox: %w", err)
	}
	type ready struct {
		rd  *wire.Ready
		err error
	}
	ch := make(chan ready, 1)
	go func() {
		rd, err := sb.ReadReady()
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
