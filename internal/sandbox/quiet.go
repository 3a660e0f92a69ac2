package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Pool fills keep out of a job's way. On the 2-core VMs measured here a
// sandbox being created, started or restored slows a job rendering beside
// it by a quarter or more, though each has a core: interleaved, pdf-png's
// render phase in a pre-booted sandbox took 129 ms alone and 171 ms while
// its replacement booted, html-pdf's in a restored one 304 and 423 ms;
// niceness, cgroup cpu.idle and SCHED_IDLE did not help (README). So, while a family still holds at
// least half its size ready, a fill waits for the jobs rendering to finish
// before it starts, and one already under way is frozen (cgroup freezer)
// while a job renders, for at most maxFreeze in all. Below half, fills run
// regardless: the next jobs need them more than this one needs the cores.

// maxFreeze bounds how long one fill may spend frozen, well inside the
// runsc commands' own time-outs.
const maxFreeze = 2 * time.Second

// renderGate counts the jobs whose request is in a sandbox.
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

// rendering marks a job's render phase; call the result when it ends.
func (m *Manager) rendering() func() {
	m.renders.add(1)
	var once sync.Once
	return func() { once.Do(func() { m.renders.add(-1) }) }
}

// reserve is how many ready sandboxes a family keeps before its fills stop
// yielding to jobs: half its size, rounded up (so a family of one always
// refills at once).
func (f *family) reserve() int { return (f.cfg.Size + 1) / 2 }

func (f *family) ready() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.idle)
}

// yielding reports whether the family's fills should give way to jobs now.
func (f *family) yielding() bool { return f.ready() >= f.reserve() }

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

// fillFreezer freezes the sandbox a fill is making while jobs render.
type fillFreezer struct {
	p    *Pool
	f    *family
	mu   sync.Mutex
	sb   *Sandbox // set once the fill has one
	stop chan struct{}
	done chan struct{}
}

// freezeFill watches the jobs rendering while a fill of f runs; set tells
// it the fill's sandbox, end stops it and leaves the sandbox thawed.
func (p *Pool) freezeFill(f *family) *fillFreezer {
	z := &fillFreezer{p: p, f: f, stop: make(chan struct{}), done: make(chan struct{})}
	go z.run()
	return z
}

func (z *fillFreezer) set(sb *Sandbox) {
	if z == nil {
		return
	}
	z.mu.Lock()
	z.sb = sb
	z.mu.Unlock()
}

// end stops freezing and thaws; it may be called more than once.
func (z *fillFreezer) end() {
	if z == nil {
		return
	}
	z.mu.Lock()
	select {
	case <-z.stop:
	default:
		close(z.stop)
	}
	z.mu.Unlock()
	<-z.done
}

func (z *fillFreezer) run() {
	defer close(z.done)
	var frozen string // the cgroup frozen now
	var since time.Time
	var spent time.Duration
	thaw := func() {
		if frozen != "" {
			setFrozen(frozen, false)
			spent += time.Since(since)
			frozen = ""
		}
	}
	defer thaw()
	for {
		n, changed := z.p.m.renders.state()
		z.mu.Lock()
		sb := z.sb
		z.mu.Unlock()
		want := n > 0 && sb != nil && spent < maxFreeze && z.f.yielding()
		switch {
		case want && frozen == "":
			if setFrozen(sb.cgroup, true) {
				frozen, since = sb.cgroup, time.Now()
			}
		case !want:
			thaw()
		}
		left := 50 * time.Millisecond
		if frozen != "" {
			left = min(left, maxFreeze-spent-time.Since(since))
		}
		select {
		case <-z.stop:
			return
		case <-changed:
		case <-time.After(max(left, time.Millisecond)):
			if frozen != "" && spent+time.Since(since) >= maxFreeze {
				thaw()
			}
		}
	}
}

// setFrozen freezes or thaws cgroup rel (cgroup v1 freezer or v2
// cgroup.freeze), reporting whether it could.
func setFrozen(rel string, frozen bool) bool {
	file, value := cgroupFile("freezer", rel, "freezer.state"), map[bool]string{true: "FROZEN", false: "THAWED"}[frozen]
	if cgroupV2() {
		file, value = cgroupFile("", rel, "cgroup.freeze"), map[bool]string{true: "1", false: "0"}[frozen]
	}
	return writeExisting(file, value) == nil
}

// frozenDir reports whether cgroup directory d (any hierarchy) is frozen.
func frozenDir(d string) bool {
	if b, err := os.ReadFile(filepath.Join(d, "freezer.state")); err == nil {
		return strings.TrimSpace(string(b)) == "FROZEN"
	}
	b, err := os.ReadFile(filepath.Join(d, "cgroup.freeze"))
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// thawDir thaws cgroup directory d (any hierarchy), if it is frozen.
func thawDir(d string) {
	_ = writeExisting(filepath.Join(d, "freezer.state"), "THAWED")
	_ = writeExisting(filepath.Join(d, "cgroup.freeze"), "0")
}

// writeExisting writes value to a file that must exist (a cgroup's).
func writeExisting(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	return errors.Join(err, f.Close())
}
