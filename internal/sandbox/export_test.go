package sandbox

// For the external tests: a render's claim on the cores without a job, and
// the freezer a pool fill uses (quiet.go).

func (m *Manager) Rendering() func() { return m.rendering() }

func SetFrozen(sb *Sandbox, frozen bool) bool { return setFrozen(sb.cgroup, frozen) }

// Frozen lists the sandboxes of m whose cgroup is frozen now.
func (m *Manager) Frozen() []string {
	var ids []string
	for _, d := range LeftoverCgroups("/" + m.cfg.CgroupParent) {
		if frozenDir(d) {
			ids = append(ids, d)
		}
	}
	return ids
}
