package render

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/renderbox/renderbox/internal/bytesize"
)

// Operator ceilings. Each renderer's limits are set in the catalogue for
// a 2-core host and a job of ordinary size: Chromium 60 s and 2 GiB, an
// office document 120 s, 50 MiB in. An operator whose fleet is sized for
// longer reports or larger scans sets a renderer's limits of their own
// (api serve and worker serve -ceilings, the same on both), within the
// hard bounds below. A ceiling is the renderer's limit: what a job gets
// unless its request lowers it, and the most a request may ask. They are
// published by GET /v1/renderers and in the contract the API serves.
const (
	MinCeilingTimeout = time.Second
	MaxCeilingTimeout = 30 * time.Minute // asynq's lease, the job's result, a person waiting: past this, split the work
	MinCeilingMemory  = 128 << 20
	MaxCeilingMemory  = 16 << 30
	MaxCeilingInput   = 512 << 20 // inputs travel through Redis, whole
	MaxCeilingOutput  = 1 << 30
	MaxCeilingPages   = 10000
)

// Ceiling is one renderer's limits as the operator sets them; a zero
// field keeps the catalogue's.
type Ceiling struct {
	Renderer    string
	Timeout     time.Duration
	MemoryBytes int64
	InputBytes  int64
	OutputBytes int64
	Pages       int
}

// ParseCeilings reads -ceilings: "html-pdf:timeout=5m,memory=3G;office-pdf:
// timeout=10m,input=200M", each key at most once: timeout (a Go duration),
// memory, input, output (sizes such as 512M or 1.5G) and pages (for the
// renderers that count pages).
func ParseCeilings(s string) ([]Ceiling, error) {
	var cs []Ceiling
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, kvs, ok := strings.Cut(part, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("-ceilings: %q is not renderer:key=value,…", part)
		}
		if seen[name] {
			return nil, fmt.Errorf("-ceilings: %s is named twice", name)
		}
		seen[name] = true
		c := Ceiling{Renderer: name}
		keys := map[string]bool{}
		for _, kv := range strings.Split(kvs, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || keys[k] {
				return nil, fmt.Errorf("-ceilings: %s: %q is not key=value, each key once (timeout, memory, input, output, pages)", name, kv)
			}
			keys[k] = true
			var err error
			switch k {
			case "timeout":
				c.Timeout, err = time.ParseDuration(v)
			case "memory":
				c.MemoryBytes, err = bytesize.Parse(v)
			case "input":
				c.InputBytes, err = bytesize.Parse(v)
			case "output":
				c.OutputBytes, err = bytesize.Parse(v)
			case "pages":
				c.Pages, err = strconv.Atoi(v)
			default:
				err = fmt.Errorf("unknown key (timeout, memory, input, output, pages)")
			}
			if err != nil {
				return nil, fmt.Errorf("-ceilings: %s: %s=%q: %v", name, k, v, err)
			}
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// SetCeilings sets the catalogue's limits from cs, after checking every
// one against the hard bounds; an error changes nothing. Call it once, as
// the process starts, before anything reads the catalogue.
func SetCeilings(cs []Ceiling) error {
	for _, c := range cs {
		if err := c.check(); err != nil {
			return err
		}
	}
	for _, c := range cs {
		r := catalogue[c.Renderer]
		if c.Timeout > 0 {
			r.Limits.Timeout = c.Timeout
		}
		if c.MemoryBytes > 0 {
			r.Limits.MemoryBytes = c.MemoryBytes
		}
		if c.InputBytes > 0 {
			r.MaxInputBytes = c.InputBytes
		}
		if c.OutputBytes > 0 {
			r.Limits.MaxOutputBytes = c.OutputBytes
		}
		if c.Pages > 0 {
			r.MaxPages = c.Pages
			r.Limits.MaxOutputFiles = max(r.Limits.MaxOutputFiles, c.Pages) // a file a page
		}
	}
	return nil
}

func (c Ceiling) check() error {
	r, ok := catalogue[c.Renderer]
	switch {
	case !ok:
		return fmt.Errorf("-ceilings: no renderer %q (GET /v1/renderers lists them)", c.Renderer)
	case r.plan != nil:
		// Its stages run in sandboxes of their own, with limits of
		// their own.
		return fmt.Errorf("-ceilings: %s runs in stages whose limits are its own; it takes no ceilings", c.Renderer)
	case c.Timeout != 0 && (c.Timeout < MinCeilingTimeout || c.Timeout > MaxCeilingTimeout):
		return fmt.Errorf("-ceilings: %s: timeout %s is outside %s to %s", c.Renderer, c.Timeout, MinCeilingTimeout, MaxCeilingTimeout)
	case c.MemoryBytes != 0 && (c.MemoryBytes < MinCeilingMemory || c.MemoryBytes > MaxCeilingMemory):
		return fmt.Errorf("-ceilings: %s: memory %s is outside %s to %s", c.Renderer, bytesize.String(c.MemoryBytes), bytesize.String(MinCeilingMemory), bytesize.String(MaxCeilingMemory))
	case c.MemoryBytes != 0 && c.MemoryBytes < r.Limits.TmpBytes+MinCeilingMemory:
		// Its /tmp (a tmpfs) is charged to its memory.
		return fmt.Errorf("-ceilings: %s: memory %s leaves too little beside its %s /tmp; at least %s", c.Renderer, bytesize.String(c.MemoryBytes), bytesize.String(r.Limits.TmpBytes), bytesize.String(r.Limits.TmpBytes+MinCeilingMemory))
	case c.InputBytes < 0 || c.InputBytes > MaxCeilingInput:
		return fmt.Errorf("-ceilings: %s: input %s is over %s (inputs travel through Redis whole)", c.Renderer, bytesize.String(c.InputBytes), bytesize.String(MaxCeilingInput))
	case c.OutputBytes < 0 || c.OutputBytes > MaxCeilingOutput:
		return fmt.Errorf("-ceilings: %s: output %s is over %s", c.Renderer, bytesize.String(c.OutputBytes), bytesize.String(MaxCeilingOutput))
	case c.Pages != 0 && r.MaxPages == 0:
		return fmt.Errorf("-ceilings: %s counts no pages", c.Renderer)
	case c.Pages < 0 || c.Pages > MaxCeilingPages:
		return fmt.Errorf("-ceilings: %s: pages %d is outside 1 to %d", c.Renderer, c.Pages, MaxCeilingPages)
	}
	return nil
}

// MaxInput is the largest input any renderer takes: the API's body bound
// must hold it (base64 in JSON makes it a third larger).
func MaxInput() int64 {
	var n int64
	for _, r := range catalogue {
		n = max(n, r.MaxInputBytes)
	}
	return n
}

// CeilingsUsage is -ceilings' help, the same for api serve and worker
// serve.
const CeilingsUsage = `renderers' limits of the operator's own, the same on the API and every worker: "html-pdf:timeout=5m,memory=3G;office-pdf:timeout=10m,input=200M" (keys timeout, memory, input, output, pages; within the bounds docs/settings.md states)`

// ApplyCeilings parses and sets -ceilings ("" changes nothing).
func ApplyCeilings(s string) error {
	cs, err := ParseCeilings(s)
	if err != nil {
		return err
	}
	return SetCeilings(cs)
}
