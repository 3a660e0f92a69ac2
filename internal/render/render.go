// Package render is the renderer catalogue: one table, read by the worker,
// the API and GET /v1/renderers, that maps a renderer name to the input
// types it accepts (sniffed from the bytes, never trusted from the client),
// what it produces, its limits, and the fixed argv it runs inside the
// sandbox.
package render

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/wire"
)

// Errors a request can be rejected with before any sandbox starts.
var (
	ErrUnknownRenderer  = errors.New("unknown renderer")
	ErrUnsupportedInput = errors.New("unsupported input")
	ErrInvalidOptions   = errors.New("invalid options")
	ErrInputTooLarge    = errors.New("input too large")
)

// Renderer is one catalogue entry.
type Renderer struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Inputs      []string `json:"inputs"` // media types accepted, as sniffed
	Output      string   `json:"output"` // media type of the outputs
	// MaxInputBytes bounds the input.
	MaxInputBytes int64 `json:"max_input_bytes"`
	// Limits are the sandbox limits a job of this renderer runs with.
	Limits sandbox.Limits `json:"-"`

	// inputName is the file name the input gets inside the sandbox.
	inputName string
	// argv builds the fixed command line; it never sees the input bytes.
	argv func() []string
	// env is the renderer's whole environment.
	env []string
	// rename maps an output file name to the published one.
	rename func(string) string
}

// chromiumArgs are the flags Chromium needs inside the sandbox (NOTES.md):
// gVisor is the sandbox, so Chromium's own is off; nothing may reach out.
var chromiumArgs = []string{
	"/usr/lib/chromium/chromium",
	"--headless",
	"--no-sandbox",
	"--disable-gpu",
	"--no-first-run",
	"--no-default-browser-check",
	"--disable-background-networking",
	"--disable-component-update",
	"--disable-sync",
	"--disable-extensions",
	"--disable-dev-shm-usage",
	"--disable-crash-reporter",
	"--disable-breakpad",
	"--user-data-dir=" + wire.WorkDir + "/chromium",
}

var chromiumEnv = []string{
	"PATH=/usr/bin:/bin",
	"HOME=" + wire.WorkDir,
	"XDG_CACHE_HOME=" + wire.WorkDir + "/.cache",
	"XDG_CONFIG_HOME=" + wire.WorkDir + "/.config",
	"LANG=C.UTF-8",
}

var plainEnv = []string{"PATH=/usr/bin:/bin", "HOME=" + wire.WorkDir, "LANG=C.UTF-8"}

// pageRe matches pdftoppm's zero-padded page numbers.
var pageRe = regexp.MustCompile(`^page-0*(\d+)\.(png|jpg)$`)

// catalogue is the table. Limits not set take sandbox defaults.
var catalogue = map[string]*Renderer{
	"pdf-png": {
		Name:          "pdf-png",
		Description:   "Rasterise each page of a PDF to PNG (150 dpi) with poppler's pdftoppm; outputs page-1.png, page-2.png, …",
		Inputs:        []string{"application/pdf"},
		Output:        "image/png",
		MaxInputBytes: 50 << 20,
		Limits:        sandbox.Limits{Timeout: 60 * time.Second, MemoryBytes: 512 << 20, TmpBytes: 512 << 20},
		inputName:     "input.pdf",
		argv: func() []string {
			return []string{"/usr/bin/pdftoppm", "-png", "-r", "150", wire.InputDir + "/input.pdf", wire.OutputDir + "/page"}
		},
		env: plainEnv,
		rename: func(n string) string {
			if m := pageRe.FindStringSubmatch(n); m != nil {
				return "page-" + m[1] + "." + m[2]
			}
			return n
		},
	},
	"svg-png": {
		Name:          "svg-png",
		Description:   "Render an SVG image to PNG with librsvg; outputs output.png",
		Inputs:        []string{"image/svg+xml"},
		Output:        "image/png",
		MaxInputBytes: 10 << 20,
		Limits:        sandbox.Limits{Timeout: 30 * time.Second, MemoryBytes: 512 << 20},
		inputName:     "input.svg",
		argv: func() []string {
			return []string{"/usr/bin/rsvg-convert", "--format=png", "--output=" + wire.OutputDir + "/output.png", wire.InputDir + "/input.svg"}
		},
		env: plainEnv,
	},
	"html-pdf": {
		Name:          "html-pdf",
		Description:   "Print an HTML page to PDF with headless Chromium; outputs output.pdf",
		Inputs:        []string{"text/html"},
		Output:        "application/pdf",
		MaxInputBytes: 10 << 20,
		// Chromium is multi-process: with one core it takes twice as long.
		Limits:    sandbox.Limits{Timeout: 60 * time.Second, MemoryBytes: 2 << 30, CPUs: 2, Pids: 1024, TmpBytes: 512 << 20},
		inputName: "input.html",
		argv: func() []string {
			return append(append([]string{}, chromiumArgs...),
				"--no-pdf-header-footer",
				"--print-to-pdf="+wire.OutputDir+"/output.pdf",
				"file://"+wire.InputDir+"/input.html")
		},
		env: chromiumEnv,
	},
}

// Lookup returns the renderer called name.
func Lookup(name string) (*Renderer, error) {
	r, ok := catalogue[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %v)", ErrUnknownRenderer, name, Names())
	}
	return r, nil
}

// Names lists the catalogue's renderer names, sorted.
func Names() []string {
	var ns []string
	for n := range catalogue {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// All returns the catalogue sorted by name.
func All() []*Renderer {
	var rs []*Renderer
	for _, n := range Names() {
		rs = append(rs, catalogue[n])
	}
	return rs
}

// Plan is a validated job: what to send to the sandbox and under which
// limits.
type Plan struct {
	Renderer *Renderer
	Job      sandbox.Job
}

// Prepare validates input and options against the renderer and returns the
// sandbox job. It runs before any sandbox starts: a wrong type, an oversized
// input or an unknown option never reaches one.
func (r *Renderer) Prepare(input []byte, options map[string]any) (*Plan, error) {
	if int64(len(input)) > r.MaxInputBytes {
		return nil, fmt.Errorf("%w: %d bytes, %s accepts at most %d", ErrInputTooLarge, len(input), r.Name, r.MaxInputBytes)
	}
	if len(options) > 0 {
		var names []string
		for k := range options {
			names = append(names, strconv.Quote(k))
		}
		sort.Strings(names)
		return nil, fmt.Errorf("%w: %s takes no options, got %v", ErrInvalidOptions, r.Name, names)
	}
	got := Sniff(input)
	ok := false
	for _, t := range r.Inputs {
		ok = ok || t == got
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s accepts %v, the input looks like %s", ErrUnsupportedInput, r.Name, r.Inputs, got)
	}
	return &Plan{Renderer: r, Job: sandbox.Job{
		Request: wire.Request{
			Mode:      wire.ModeRender,
			Argv:      r.argv(),
			Env:       r.env,
			InputName: r.inputName,
			InputSize: int64(len(input)),
		},
		Limits: r.Limits,
	}}, nil
}

// OutputName maps an output file name to the one published for it.
func (r *Renderer) OutputName(name string) string {
	if r.rename == nil {
		return name
	}
	return r.rename(name)
}
