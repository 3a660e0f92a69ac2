package render

import (
	"fmt"
	"time"

	"github.com/renderbox/renderbox/internal/jobspec"
	"github.com/renderbox/renderbox/internal/wire"
)

// Renderer families: renderers whose sandboxes boot the same thing and so
// can come from one pool of pre-booted sandboxes.
const (
	FamilyChromium = "chromium" // html-pdf, html-png, markdown-pdf
	FamilyOffice   = "office"   // office-pdf
	FamilyPDF      = "pdf"      // pdf-png: pdftoppm started, reading stdin
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
	case "pdf-png":
		return FamilyPDF
	}
	return FamilyLight
}

// primed is the renderer whose program a family's sandboxes start before
// their job (wire.WarmExec): its first step for its default options and
// limits, which a job with other options or lower limits does not use
// (the agent then kills it and starts its own).
var primed = map[string]string{FamilyPDF: "pdf-png"}

// primedWarm is what the sandboxes of a family in primed start.
func primedWarm(renderer string) (wire.Warm, error) {
	r := catalogue[renderer]
	vals, err := validate(r.Name, r.Options, nil)
	if err != nil {
		return wire.Warm{}, err
	}
	lim, err := r.EffectiveLimits(LimitRequest{})
	if err != nil {
		return wire.Warm{}, err
	}
	req, err := r.build(inputFile{Type: r.Inputs[0], Path: wire.InputDir + "/input"}, vals, lim)
	if err != nil {
		return wire.Warm{}, err
	}
	if len(req.Steps) == 0 || req.Steps[0].Stdin == "" {
		return wire.Warm{}, fmt.Errorf("%s does not read its input on stdin: nothing to start before the job", renderer)
	}
	return wire.Warm{Kind: wire.WarmExec, Argv: req.Steps[0].Argv, Env: req.Env}, nil
}

// chromiumSettle is the Settle of a restored Chromium: it reads the clock
// thousands of times a page, each read a system call until gVisor's clock
// calibration, restarted by the restore, is ready again (docs/pool.md,
// "Settling after a restore").
const chromiumSettle = 1200 * time.Millisecond

// chromiumTemplateWait is the TemplateWait of Chromium: it starts work for
// seconds after it says it is ready, and every sandbox restored from an
// image saved earlier would do that work again (docs/pool.md, "Waiting
// before a checkpoint").
const chromiumTemplateWait = 6 * time.Second

// PoolFamilies returns each family's pool: what its sandboxes boot and the
// limits they are created with — the highest of the family's renderers', so
// that each of them fits (a renderer with lower ones gets its own written
// into the sandbox's cgroup before its request). Sizes and budgets are the
// operator's.
func PoolFamilies() []jobspec.Family {
	fams := []jobspec.Family{
		// Only Chromium settles and waits: LibreOffice reads the clock
		// seldom, and waiting cost its jobs more than it saved (docs/pool.md).
		{Name: FamilyChromium, Warm: wire.Warm{Kind: wire.WarmBrowser, Argv: chromiumArgs, Env: chromiumEnv}, Settle: chromiumSettle, TemplateWait: chromiumTemplateWait},
		{Name: FamilyOffice, Warm: wire.Warm{Kind: wire.WarmOffice, Env: officeEnv}},
		{Name: FamilyPDF},
		{Name: FamilyLight},
	}
	for i := range fams {
		if r, ok := primed[fams[i].Name]; ok {
			w, err := primedWarm(r)
			if err != nil {
				panic(fmt.Sprintf("the catalogue's %s: %v", r, err)) // TestPrimedFamilies
			}
			fams[i].Warm = w
		}
		var l jobspec.Limits
		for _, r := range catalogue {
			if r.Family() != fams[i].Name {
				continue
			}
			rl := r.Limits
			l.Timeout = max(l.Timeout, rl.Timeout)
			l.MemoryBytes = max(l.MemoryBytes, rl.MemoryBytes)
			l.CPUs = max(l.CPUs, rl.CPUs)
			l.Pids = max(l.Pids, rl.Pids)
			l.TmpBytes = max(l.TmpBytes, rl.TmpBytes)
		}
		fams[i].Limits = l.WithDefaults() // the rest: what the renderers take
	}
	return fams
}
