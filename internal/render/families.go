package render

import (
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/wire"
)

// Renderer families: renderers whose sandboxes boot the same thing and so
// can come from one pool of pre-booted sandboxes.
const (
	FamilyChromium = "chromium" // html-pdf, html-png, markdown-pdf
	FamilyOffice   = "office"   // office-pdf
	FamilyLight    = "light"    // every other renderer: the agent alone waits
)

// lightTmp is the /tmp of every light renderer, so that one pool serves
// them all (the tmpfs size is fixed when a sandbox is created; its pages
// are charged to the sandbox's memory limit either way).
const lightTmp = 512 << 20

// Family returns the renderer's family. The diagnostic renderer
// (sandbox-probe) is light: it tries its escapes from where they run.
func (r *Renderer) Family() string {
	switch r.Name {
	case "html-pdf", "html-png", "markdown-pdf":
		return FamilyChromium
	case "office-pdf":
		return FamilyOffice
	}
	return FamilyLight
}

// PoolFamilies returns each family's pool: what its sandboxes boot and the
// limits they are created with — the highest of the family's renderers', so
// that each of them fits (a renderer with lower ones gets its own written
// into the sandbox's cgroup before its request). Sizes and budgets are the
// operator's.
func PoolFamilies() []sandbox.PoolFamily {
	fams := []sandbox.PoolFamily{
		{Name: FamilyChromium, Warm: wire.Warm{Kind: wire.WarmBrowser, Argv: chromiumArgs, Env: chromiumEnv}},
		{Name: FamilyOffice, Warm: wire.Warm{Kind: wire.WarmOffice, Env: officeEnv}},
		{Name: FamilyLight},
	}
	for i := range fams {
		var l sandbox.Limits
		for _, r := range catalogue {
			if r.Family() != fams[i].Name {
				continue
			}
			rl := r.Limits.WithDefaults()
			l.Timeout = max(l.Timeout, rl.Timeout)
			l.MemoryBytes = max(l.MemoryBytes, rl.MemoryBytes)
			l.CPUs = max(l.CPUs, rl.CPUs)
			l.Pids = max(l.Pids, rl.Pids)
			l.TmpBytes = max(l.TmpBytes, rl.TmpBytes)
		}
		fams[i].Limits = l.WithDefaults()
	}
	return fams
}
