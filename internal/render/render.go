// Package render is the renderer catalogue: one table, read by the worker,
// the API and GET /v1/renderers, that maps a renderer name to the input
// types it accepts (sniffed from the bytes, never trusted from the client),
// its options with their bounds, its limits, and the fixed argv it runs
// inside the sandbox. Everything here runs before a sandbox starts: a wrong
// type, an unknown or out-of-range option, or an oversized input never
// reaches one.
package render

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/renderbox/renderbox/internal/bytesize"
	"github.com/renderbox/renderbox/internal/jobspec"
	"github.com/renderbox/renderbox/internal/wire"
)

// Errors a request can be rejected with before any sandbox starts. Their
// names match the API's error codes.
var (
	ErrUnknownRenderer  = errors.New("unknown renderer")
	ErrUnsupportedInput = errors.New("unsupported input")
	ErrInvalidInput     = errors.New("invalid input")
	ErrInvalidOptions   = errors.New("invalid options")
	ErrInputTooLarge    = errors.New("input too large")
)

// errNoRenderer is a request that names no renderer. It is an
// ErrUnknownRenderer (the API's code stays unknown_renderer) whose text
// says what is missing rather than quote an empty name.
type errNoRenderer struct{}

func (errNoRenderer) Error() string {
	return "renderer is required: name one of " + strings.Join(Names(), ", ") + " (GET /v1/renderers describes each)"
}

func (errNoRenderer) Is(target error) bool { return target == ErrUnknownRenderer }

// Renderer is one catalogue entry.
type Renderer struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Inputs      []string `json:"inputs"` // media types accepted, as sniffed
	Output      string   `json:"output"` // media type of the outputs
	Options     []Option `json:"options"`
	// MaxInputBytes bounds the input.
	MaxInputBytes int64 `json:"max_input_bytes"`
	// ReportsSize: the job's diagnostics say how much smaller the
	// renderer made its input (pdf-optimize).
	ReportsSize bool `json:"-"`
	// Limits are the sandbox limits a job runs with, resolved as the
	// renderer joins the catalogue; a request may lower them, never raise
	// them.
	Limits jobspec.Limits `json:"-"`
	// MaxPages bounds the pages rendered (pdf-png); 0 if not applicable.
	MaxPages int `json:"max_pages,omitempty"`
	// MaxPixels bounds the pixels of an input image (image-thumbnail) or a
	// capture (html-png); 0 if not applicable.
	MaxPixels int64 `json:"max_pixels,omitempty"`

	// build makes the sandbox request from validated options.
	build func(in inputFile, v Values, l jobspec.Limits) (wire.Request, error)
	// check inspects the input's headers further (e.g. image dimensions).
	check func(input []byte, l jobspec.Limits) error
	// site, when set, lets the renderer take a ZIP of files, one of them
	// the entry point.
	site *siteRule
	// parts: the renderer takes a ZIP of PDFs, every file an input in the
	// archive's order (pdf-merge; see mergeParts).
	parts bool
	// plan, when set, adds the stages that run after the first, each in
	// a sandbox of its own (safe-pdf; see Plan.Next).
	plan func(*Plan)
	// partsOf, when set, reads and checks the parts instead of
	// mergeParts (pdf-watermark's document and its mark).
	partsOf func(input []byte) ([]string, error)
	// typedParts, when set, reads and checks the parts and returns each
	// one's sniffed type too (office-pdf's documents and PDFs).
	typedParts func(input []byte) (files, types []string, err error)
	// rules names the renderer whose output rule applies, when not this
	// one's (a chain's last step).
	rules string
	// urls: the renderer takes a URL for its page (input_type TypeURL),
	// which the host's broker fetches for it (wire.Browser's URL).
	urls bool
}

// inputFile is the input as the sandbox sees it.
type inputFile struct {
	Type string // sniffed media type
	Path string // absolute path inside the sandbox
	// Site is the directory a ZIP input is unpacked to, Entry the entry
	// point's path in it; both "" for a single file.
	Site, Entry string
	// Files are the paths in Site of a renderer that takes every file
	// (Renderer.parts), in order; Types their sniffed types when the
	// renderer reads them (Renderer.typedParts).
	Files, Types []string
	// Name is the job's output_name, "" when the renderer names its
	// outputs (markdown-pdf's title falls back to it).
	Name string
	// URL is the page's, when the input is one (TypeURL).
	URL string
}

// page is the file the renderer starts from.
func (in inputFile) page() string {
	if in.Site != "" {
		return in.Site + "/" + in.Entry
	}
	return in.Path
}

// extensions name the input file inside the sandbox by its sniffed type;
// LibreOffice and vips choose their loader by it.
var extensions = map[string]string{
	TypePDF: "pdf", TypeSVG: "svg", TypeHTML: "html", TypeText: "txt", TypeDOT: "dot",
	TypePNG: "png", TypeJPEG: "jpg", TypeGIF: "gif", TypeWebP: "webp", TypeTIFF: "tif",
	TypeRTF: "rtf", TypeDOCX: "docx", TypeXLSX: "xlsx", TypePPTX: "pptx",
	TypeODT: "odt", TypeODS: "ods", TypeODP: "odp",
	TypeDOC: "doc", TypeXLS: "xls", TypePPT: "ppt", TypeOOXMLEncrypted: "ooxml", TypeODG: "odg",
	TypeOTT: "ott", TypeOTS: "ots", TypeOTP: "otp", TypeOTG: "otg",
	TypeFODT: "fodt", TypeFODS: "fods", TypeFODP: "fodp", TypeFODG: "fodg",
	TypeSXW: "sxw", TypeSXC: "sxc", TypeSXI: "sxi", TypeSXD: "sxd", TypeCSV: "csv",
	TypeMarkdown: "md", TypeZIP: "zip",
}

// Lookup returns the renderer called name.
func Lookup(name string) (*Renderer, error) {
	if strings.Contains(name, ChainSeparator) {
		return lookupChain(name)
	}
	if name == "" {
		return nil, errNoRenderer{}
	}
	r, ok := catalogue[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownRenderer, name, strings.Join(Names(), ", "))
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

// LimitRequest lowers a renderer's limits for one job. Zero fields keep
// the renderer's; a value above the renderer's is refused.
type LimitRequest struct {
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
	MemoryBytes    int64   `json:"memory_bytes,omitempty"`
	MaxOutputBytes int64   `json:"max_output_bytes,omitempty"`
	MaxPages       int     `json:"max_pages,omitempty"`
	MaxPixels      int64   `json:"max_pixels,omitempty"`
}

// EffectiveLimits applies req to the renderer's limits.
func (r *Renderer) EffectiveLimits(req LimitRequest) (jobspec.Limits, error) {
	l := r.Limits // resolved as it joined the catalogue
	l.MaxPages, l.MaxPixels = r.MaxPages, r.MaxPixels
	lower := func(name string, got, max float64) (bool, error) {
		switch {
		case got == 0:
			return false, nil
		case got < 0 || math.IsNaN(got):
			return false, fmt.Errorf("%w: limit %s must be positive, got %v", ErrInvalidOptions, name, got)
		case name == "timeout_seconds" && got < MinTimeout:
			// 1e-10 s rounds to a zero Duration, which means the
			// renderer's default: a lowered limit would raise it.
			return false, fmt.Errorf("%w: limit timeout_seconds must be at least %g (1 ms), got %v", ErrInvalidOptions, MinTimeout, got)
		case max == 0:
			return false, fmt.Errorf("%w: limit %s does not apply to %s", ErrInvalidOptions, name, r.Name)
		case got > max:
			return false, fmt.Errorf("%w: limit %s of %s is above %s's maximum of %s; a request may lower limits, never raise them", ErrInvalidOptions, name, limitText(name, got), r.Name, limitText(name, max))
		}
		return true, nil
	}
	var ok bool
	var err error
	if ok, err = lower("timeout_seconds", req.TimeoutSeconds, l.Timeout.Seconds()); ok {
		l.Timeout = time.Duration(req.TimeoutSeconds * float64(time.Second))
	}
	if err != nil {
		return l, err
	}
	if ok, err = lower("memory_bytes", float64(req.MemoryBytes), float64(l.MemoryBytes)); ok {
		if req.MemoryBytes < MinMemoryBytes {
			return l, fmt.Errorf("%w: limit memory_bytes must be at least %s", ErrInvalidOptions, limitText("memory_bytes", MinMemoryBytes))
		}
		l.MemoryBytes = req.MemoryBytes
	}
	if err != nil {
		return l, err
	}
	if ok, err = lower("max_output_bytes", float64(req.MaxOutputBytes), float64(l.MaxOutputBytes)); ok {
		l.MaxOutputBytes = req.MaxOutputBytes
	}
	if err != nil {
		return l, err
	}
	if ok, err = lower("max_pages", float64(req.MaxPages), float64(l.MaxPages)); ok {
		l.MaxPages = req.MaxPages
	}
	if err != nil {
		return l, err
	}
	if ok, err = lower("max_pixels", float64(req.MaxPixels), float64(l.MaxPixels)); ok {
		l.MaxPixels = req.MaxPixels
	}
	return l, err
}

// limitText shows a limit's value as a message does: one in bytes (a
// name ending in _bytes) as its count, which the request is written in,
// and in KiB/MiB; any other as a plain number, never in exponent form.
func limitText(name string, v float64) string {
	if strings.HasSuffix(name, "_bytes") && v == math.Trunc(v) && math.Abs(v) < 1<<62 {
		return fmt.Sprintf("%d (%s)", int64(v), bytesize.String(int64(v)))
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// TakesSeveralFiles says whether the renderer takes several files (a page
// and what it loads, or documents to combine) as a ZIP of them; any other
// takes exactly one file.
func (r *Renderer) TakesSeveralFiles() bool { return r.site != nil || r.parts }

// Plan is a validated job: what to send to the sandbox and under which
// limits.
type Plan struct {
	Renderer  *Renderer
	InputType string
	Options   Values
	Limits    jobspec.Limits
	// Request is the validated limit request: what a queued job carries
	// instead of the client's text.
	Request LimitRequest
	Job     jobspec.Job

	// firstStage and firstFamily name Job's stage and pool when the
	// renderer runs in several sandboxes; stages are the ones after it.
	firstStage, firstFamily string
	stages                  []stage
	// frames takes safe-pdf's frames from its pixel stage (frames.go).
	frames *frameSpool
}

// Close drops what the plan keeps on the host between its stages (the
// spill file of safe-pdf's frames). Call it once the job's last stage has
// ended; a plan that ran no stage has nothing to drop.
func (p *Plan) Close() {
	if p.frames != nil {
		p.frames.close()
	}
}

// Prepare validates the input, options and limits against the renderer and
// returns the sandbox job (without its Input reader, which the caller sets).
func (r *Renderer) Prepare(input []byte, options map[string]any, limits LimitRequest) (*Plan, error) {
	return r.prepare(input, "", options, limits, "")
}

// prepare is Prepare with the input's declared type ("" if none; see
// resolveType).
func (r *Renderer) prepare(input []byte, declared string, options map[string]any, limits LimitRequest, outputName string) (*Plan, error) {
	if int64(len(input)) > r.MaxInputBytes {
		return nil, fmt.Errorf("%w: the input is %s; %s accepts at most %s", ErrInputTooLarge, bytesize.String(int64(len(input))), r.Name, bytesize.String(r.MaxInputBytes))
	}
	vals, err := validate(r.Name, r.Options, options)
	if err != nil {
		return nil, err
	}
	lim, err := r.EffectiveLimits(limits)
	if err != nil {
		return nil, err
	}
	if declared == TypeURL {
		return r.prepareURL(input, vals, lim, limits, outputName)
	}
	for _, name := range urlOptionNames {
		if vals.Has(name) {
			return nil, fmt.Errorf("%w: %s is for a page given by url", ErrInvalidOptions, name)
		}
	}
	if len(input) == 0 {
		return nil, fmt.Errorf("%w: the file is empty (%s accepts %s)", ErrUnsupportedInput, r.Name, strings.Join(r.Inputs, ", "))
	}
	sniffed, err := sniff(input)
	if err != nil {
		return nil, err
	}
	got, err := resolveType(input, sniffed, declared)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(r.Inputs, got) {
		how := ""
		if isText(input) {
			for _, t := range r.Inputs {
				if declarable[t] == t {
					how = fmt.Sprintf("; to take the text as %s, declare it: input_type=%s", t, t)
					break
				}
			}
		}
		if declared != "" {
			return nil, fmt.Errorf("%w: %s accepts %s, not %s (declared by input_type)", ErrUnsupportedInput, r.Name, strings.Join(r.Inputs, ", "), got)
		}
		return nil, fmt.Errorf("%w: %s accepts %s; the input's bytes look like %s (they begin %s)%s", ErrUnsupportedInput, r.Name, strings.Join(r.Inputs, ", "), got, seen(input), how)
	}
	if r.check != nil {
		if err := r.check(input, lim); err != nil {
			return nil, err
		}
	}
	in := inputFile{Type: got, Path: wire.InputDir + "/input." + extensions[got], Name: outputName}
	var unpack *wire.Unpack
	switch {
	case got == TypeZIP && r.site != nil:
		entry, err := r.site.check(input, vals.String("entry"), map[string]string{"stylesheet": vals.String("stylesheet")})
		if err != nil {
			return nil, err
		}
		in.Site, in.Entry = siteDir, entry
		unpack = &wire.Unpack{Archive: in.Path, Dir: siteDir, MaxFiles: r.site.maxFiles, MaxBytes: r.site.maxBytes}
	case got == TypeZIP && r.parts:
		var files, types []string
		var err error
		switch {
		case r.typedParts != nil:
			files, types, err = r.typedParts(input)
		case r.partsOf != nil:
			files, err = r.partsOf(input)
		default:
			files, err = mergeParts(input)
		}
		if err != nil {
			return nil, err
		}
		in.Site, in.Files, in.Types = siteDir, files, types
		unpack = &wire.Unpack{Archive: in.Path, Dir: siteDir, MaxFiles: MaxMergeFiles, MaxBytes: r.MaxInputBytes}
	case vals.Has("entry") || vals.Has("stylesheet"):
		return nil, fmt.Errorf("%w: entry and stylesheet name files of a ZIP or of several file parts; the input is one %s file", ErrInvalidOptions, got)
	}
	return r.planFor(in, unpack, input, vals, lim, limits)
}

// planFor builds the plan of a validated input.
func (r *Renderer) planFor(in inputFile, unpack *wire.Unpack, input []byte, vals Values, lim jobspec.Limits, limits LimitRequest) (*Plan, error) {
	req, err := r.build(in, vals, lim)
	if err != nil {
		return nil, err
	}
	req.Unpack = unpack
	req.Mode = wire.ModeRender
	req.InputName = path.Base(in.Path)
	req.InputSize = int64(len(input))
	plan := &Plan{Renderer: r, InputType: in.Type, Options: vals, Limits: lim, Request: limits, Job: jobspec.Job{Request: req, Limits: lim}}
	if r.plan != nil {
		r.plan(plan)
	}
	return plan, nil
}

// TypeURL is the input type of a page given by its URL (the API's url):
// the input is the URL itself, which the page is loaded from through the
// host's broker.
const TypeURL = "text/uri-list"

// MaxURL bounds a page's URL.
const MaxURL = 2048

// CheckURL checks a page's URL: absolute http or https, a host, no
// credentials, at most MaxURL bytes. Where it may lead is the broker's
// policy, on the worker.
func CheckURL(raw string) error {
	if len(raw) > MaxURL {
		return fmt.Errorf("%w: url is over %d bytes", ErrInvalidInput, MaxURL)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("%w: url is not a URL", ErrInvalidInput)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%w: url's scheme %s: only http and https pages are fetched", ErrInvalidInput, strconv.Quote(u.Scheme))
	case u.Host == "":
		return fmt.Errorf("%w: url has no host", ErrInvalidInput)
	case u.User != nil:
		return fmt.Errorf("%w: url carries credentials, which are not sent", ErrInvalidInput)
	case !wire.FetchableURL(raw):
		return fmt.Errorf("%w: url is not a URL", ErrInvalidInput)
	}
	return nil
}

// urlOptions are what a page given by url sends: to the hosts
// credentials_host matches (default the url's own), never to a third
// party. The host adds them to the requests it makes; they never enter
// the sandbox.
func urlOptions() []Option {
	const secret = " A secret: it is not stored with the job, logged or shown back (the job's options read \"" + Redacted + "\"); it goes only to the hosts credentials_host matches."
	return []Option{
		secretOpt(patternOpt("cookies", "With url: the Cookie header the page's requests carry, e.g. \"session=abc; theme=dark\"."+secret, `[^\x00-\x1f\x7f]{1,1000}`), "1–1000 characters, no control characters"),
		secretOpt(patternOpt("extra_http_headers", "With url: headers the page's requests carry, one \"Name: value\" a line."+secret, `[^\x00-\x08\x0b-\x1f\x7f]{1,1000}`), "1–1000 characters, lines of \"Name: value\""),
		patternOpt("http_username", "With url: the user name of HTTP basic authentication (with http_password).", `[^\x00-\x1f\x7f:]{1,255}`),
		secretOpt(patternOpt("http_password", "With url: the password of HTTP basic authentication."+secret, `[^\x00-\x1f\x7f]{1,255}`), "1–255 characters, no control characters"),
		patternOpt("credentials_host", "With url: the hosts cookies, extra_http_headers and the basic authentication go to, a name or *.domain (default: the url's host).", `(\*\.)?[A-Za-z0-9.-]{1,253}`),
	}
}

// urlOptionNames are urlOptions' names.
var urlOptionNames = []string{"cookies", "extra_http_headers", "http_username", "http_password", "credentials_host"}

// forbiddenHeaders are the transport's to set, or cookies' and basic
// authentication's own options.
var forbiddenHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Upgrade": true,
	"Te": true, "Trailer": true, "Keep-Alive": true, "Proxy-Authorization": true, "Proxy-Connection": true,
	"Cookie": true, "User-Agent": true,
}

// pageHeaders parses what urlOptions send; an error names no value.
func pageHeaders(v Values) (http.Header, error) {
	h := http.Header{}
	if raw := v.String("extra_http_headers"); raw != "" {
		for i, line := range strings.Split(raw, "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			name, val, ok := strings.Cut(line, ":")
			name = http.CanonicalHeaderKey(strings.TrimSpace(name))
			if !ok || !validHeaderName(name) {
				return nil, fmt.Errorf("%w: extra_http_headers line %d: want \"Name: value\"", ErrInvalidOptions, i+1)
			}
			if forbiddenHeaders[name] {
				return nil, fmt.Errorf("%w: extra_http_headers line %d: %s is not sent this way (the transport's, or cookies', user_agent's)", ErrInvalidOptions, i+1, name)
			}
			h.Add(name, strings.TrimSpace(val))
		}
	}
	if c := v.String("cookies"); c != "" {
		h.Set("Cookie", c)
	}
	user, pass := v.String("http_username"), v.String("http_password")
	if (user == "") != (pass == "") {
		return nil, fmt.Errorf("%w: http_username and http_password go together", ErrInvalidOptions)
	}
	if user != "" {
		if h.Get("Authorization") != "" {
			return nil, fmt.Errorf("%w: extra_http_headers has an Authorization and http_username gives another", ErrInvalidOptions)
		}
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
	}
	return h, nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r > 0x7e || r <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r) {
			return false
		}
	}
	return true
}

// PageHeaders are the headers a page given by url sends, and the host
// pattern of the hosts they go to; none for another job.
func (p *Plan) PageHeaders() (scope string, h http.Header) {
	b := p.Job.Request.Browser
	if b == nil || b.URL == "" {
		return "", nil
	}
	h, err := pageHeaders(p.Options)
	if err != nil || len(h) == 0 {
		return "", nil
	}
	scope = p.Options.String("credentials_host")
	if scope == "" {
		if u, err := url.Parse(b.URL); err == nil {
			scope = u.Hostname()
		}
	}
	return scope, h
}

// prepareURL is prepare for a page given by its URL.
func (r *Renderer) prepareURL(input []byte, vals Values, lim jobspec.Limits, limits LimitRequest, outputName string) (*Plan, error) {
	if !r.urls {
		return nil, fmt.Errorf("%w: %s does not take a url (html-pdf and html-png do)", ErrUnsupportedInput, r.Name)
	}
	raw := string(input)
	if err := CheckURL(raw); err != nil {
		return nil, err
	}
	if vals.Has("entry") || vals.Has("stylesheet") {
		return nil, fmt.Errorf("%w: entry and stylesheet name files of a ZIP or of several file parts; the input is a url", ErrInvalidOptions)
	}
	if _, err := pageHeaders(vals); err != nil {
		return nil, err
	}
	in := inputFile{Type: TypeURL, Path: wire.InputDir + "/input.url", Name: outputName, URL: raw}
	return r.planFor(in, nil, input, vals, lim, limits)
}

// PrepareJSON is Prepare with options and limits as raw JSON objects (as
// the API receives them); either may be empty. Each is bounded in size and
// read key by key: the first unknown key ends the parse.
func (r *Renderer) PrepareJSON(input []byte, options, limits json.RawMessage) (*Plan, error) {
	return r.PrepareTyped(input, "", options, limits)
}

// PrepareTyped is PrepareJSON with the client's declared input type
// (input_type; "" if none): a declared text type is taken when the bytes
// are text, any other must agree with them.
func (r *Renderer) PrepareTyped(input []byte, inputType string, options, limits json.RawMessage) (*Plan, error) {
	return r.PrepareNamed(input, inputType, options, limits, "")
}

// PrepareNamed is PrepareTyped for a job whose outputs are named
// outputName (its output_name, checked by CheckOutputName; "" for the
// renderer's names): what the worker runs. A markdown-pdf without a
// heading takes it as its title.
func (r *Renderer) PrepareNamed(input []byte, inputType string, options, limits json.RawMessage, outputName string) (*Plan, error) {
	declared, err := ParseDeclared(inputType)
	if err != nil {
		return nil, err
	}
	opts, err := r.DecodeOptions(options)
	if err != nil {
		return nil, err
	}
	lim, err := DecodeLimits(limits)
	if err != nil {
		return nil, err
	}
	return r.prepare(input, declared, opts, lim, outputName)
}
