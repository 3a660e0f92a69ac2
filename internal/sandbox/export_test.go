package sandbox

import "context"

// PrepareProcess is Prepare with args in place of the agent: a test's
// stand-in for a subverted agent, in a real sandbox.
func (m *Manager) PrepareProcess(ctx context.Context, limits Limits, args []string) (*Sandbox, error) {
	return m.prepare(ctx, limits, args)
}

// ImageRestores returns how often each checkpoint image of the family in
// use now has been restored from, oldest image first.
func (p *Pool) ImageRestores(family string) []int {
	f := p.fams[family]
	f.mu.Lock()
	defer f.mu.Unlock()
	var n []int
	for _, img := range f.images {
		n = append(n, img.restores)
	}
	return n
}
