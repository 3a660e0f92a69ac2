package sandbox

import (
	"context"
	"sync"
	"time"
)

// Gate counts the jobs rendering on this host, so that the pool's fills
// keep out of their way: a sandbox being made beside a render slows it by
// a quarter or more, though each has a core (docs/pool.md, "The gate").
// The Manager holds the one gate every job passes, cold or pooled; the
// pool decides when to wait on it. The zero Gate is ready to use.
type Gate struct {
	mu sync.Mutex
	n  int
	// changed is closed, and replaced, whenever n goes to or from zero.
	changed chan struct{}
}

// Enter counts one render from now; call the result, once or more, when
// it ends.
func (g *Gate) Enter() (leave func()) {
	g.add(1)
	var once sync.Once
	return func() { once.Do(func() { g.add(-1) }) }
}

// Await returns when no job is rendering, or yield reports false, or ctx
// ends. yield is asked again whenever the count changes and at least every
// 50 ms, since a job's take may have changed its answer.
func (g *Gate) Await(ctx context.Context, yield func() bool) {
	for {
		n, changed := g.state()
		if n == 0 || !yield() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (g *Gate) state() (int, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.changed == nil {
		g.changed = make(chan struct{})
	}
	return g.n, g.changed
}

func (g *Gate) add(d int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	was := g.n
	g.n += d
	if (was == 0) != (g.n == 0) && g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
}
