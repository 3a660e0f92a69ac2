package sandbox

import (
	"context"
	"sync"
	"time"
)

// Pool fills wait for a quiet moment. On the 2-core VMs measured here a
// sandbox being created, started or restored slows a job rendering beside
// it by a quarter or more, though each has a core: interleaved, pdf-png's
// render phase in a pre-booted sandbox took 129–139 ms alone and 171–186
// ms while its replacement booted, html-pdf's in a restored one 281–304
// and 396–423 ms; niceness, cgroup cpu.idle and SCHED_IDLE did not help
// (docs/pool.md, "Fills wait for a quiet moment"). So, while a family still holds at least half its size ready,
// a fill does not start while a job renders. Below half, fills start regardless: the next
// jobs need them more than this one needs the cores. A fill already under
// way runs on (freezing one mid-boot made its sandbox die under load).

// renderGate counts the jobs rendering: from the Take of a pool sandbox,
// or a cold job's request, to the answer.
type renderGate struct {
	mu sync.Mutex
	n  int
	// changed is closed, and replaced, whenever n goes to or from zero.
	changed chan struct{}
}

func (g *renderGate) state() (int, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.changed == nil {
		g.changed = make(chan struct{})
	}
	return g.n, g.changed
}

func (g *renderGate) add(d int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	was := g.n
	g.n += d
	if (was == 0) != (g.n == 0) && g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
}

// rendering marks a job's render; call the result, once or more, when it
// ends.
func (m *Manager) rendering() func() {
	m.renders.add(1)
	var once sync.Once
	return func() { once.Do(func() { m.renders.add(-1) }) }
}

// reserve is how many ready sandboxes a family keeps before its fills stop
// yielding to jobs: half its size, rounded up (so a family of one always
// refills at once).
func (f *family) reserve() int { return (f.cfg.Size + 1) / 2 }

// yielding reports whether the family's fills should give way to jobs now:
// whether it holds its reserve of settled sandboxes. One still settling
// does not count: a job would wait for it, and the cores the fill left
// to the renders would stand idle.
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

// awaitQuiet returns when no job is rendering, or the family is below its
// reserve, or ctx ends.
func (p *Pool) awaitQuiet(ctx context.Context, f *family) {
	for {
		n, changed := p.m.renders.state()
		if n == 0 || !f.yielding() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-time.After(50 * time.Millisecond): // a take may have drained the family
		}
	}
}
