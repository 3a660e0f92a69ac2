package sandbox

import "context"

// PrepareProcess is Prepare with args in place of the agent: a test's
// stand-in for a subverted agent, in a real sandbox.
func (m *Manager) PrepareProcess(ctx context.Context, limits Limits, args []string) (*Sandbox, error) {
	return m.prepare(ctx, limits, args, true)
}
