package render

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/renderbox/renderbox/internal/jobspec"
	"github.com/renderbox/renderbox/internal/wire"
)

// Paper sizes in inches, by the names a request may use in any case.
var papers = map[string][2]float64{
	"letter": {8.5, 11}, "legal": {8.5, 14}, "tabloid": {11, 17}, "ledger": {17, 11},
	"a0": {33.11, 46.81}, "a1": {23.39, 33.11}, "a2": {16.54, 23.39}, "a3": {11.69, 16.54},
	"a4": {8.27, 11.69}, "a5": {5.83, 8.27}, "a6": {4.13, 5.83},
}

var paperNames = []string{"letter", "legal", "tabloid", "ledger", "a0", "a1", "a2", "a3", "a4", "a5", "a6"}

// lengthPattern is a length with its unit.
const lengthPattern = `[0-9]{1,4}(\.[0-9]{1,4})?(mm|cm|in|pt|px)`

var unitsPerInch = map[string]float64{"mm": 25.4, "cm": 2.54, "in": 1, "pt": 72, "px": 96}

// inches converts a length that matched lengthPattern.
func inches(s string) float64 {
	n := len(s) - 2
	v, _ := strconv.ParseFloat(s[:n], 64)
	return v / unitsPerInch[s[n:]]
}

// lengthOpt is a length with a unit (mm, cm, in, pt or px), between lo and
// hi inches.
func lengthOpt(name, desc string, lo, hi float64) Option {
	o := patternOpt(name, fmt.Sprintf("%s A length with its unit: mm, cm, in, pt or px, e.g. \"210mm\" or \"8.5in\"; from %gin to %gin.", desc, lo, hi), lengthPattern)
	o.more = func(s string) error {
		if v := inches(s); v < lo || v > hi {
			return fmt.Errorf("%s is %.3gin, out of range [%gin, %gin]", s, v, lo, hi)
		}
		return nil
	}
	return o
}

// pageOptions are what every Chromium renderer takes: how the page loads,
// what it waits for, and what counts as failure. withJS adds JavaScript
// and what needs it.
func pageOptions(withJS bool) []Option {
	o := []Option{
		boolOpt("omit_background", "Leave out the default white background: transparent where the page sets none.", false),
		numOpt("wait_delay", "Seconds to wait after the page's load event before printing (for content drawn by timers); with wait_timeout, at most the job's timeout less 5 s.", 0, 0, MaxCeilingTimeout.Seconds()),
		textOpt("wait_for_selector", "Wait until an element matches this CSS selector (within wait_timeout) before printing; works with JavaScript off.", 512),
		numOpt("wait_timeout", "Seconds wait_for_selector and wait_for_expression may wait; the job fails render_failed when they are not met by then. With wait_delay, at most the job's timeout less 5 s.", 10, 0.1, MaxCeilingTimeout.Seconds()),
		boolOpt("fail_on_resource_error", "Fail the job when the page asks for anything it cannot have: another origin, or a file the job does not have (the job's record lists them either way).", false),
		boolOpt("fail_on_console_error", "Fail the job when the page logs a console error or throws an uncaught exception (the record lists them either way).", false),
		patternOpt("entry", "With a ZIP or several files: the page to start from, by its path (default: index.html, else the first .html file).", sitePathPattern),
		patternOpt("user_agent", "The User-Agent the page sees (navigator.userAgent) and, for a page given by url, the one every request made for it carries; printable ASCII.", "[ -~]{1,256}"),
		patternOpt("prefers_color_scheme", "Emulate the CSS media feature prefers-color-scheme: light or dark.", "light|dark"),
		patternOpt("prefers_reduced_motion", "Emulate the CSS media feature prefers-reduced-motion: reduce or no-preference.", "reduce|no-preference"),
	}
	if withJS {
		o = append(o,
			boolOpt("javascript", "Run the page's JavaScript (off unless asked for: a page's scripts are the largest attack surface Chromium has).", false),
			textOpt("wait_for_expression", "Wait until this JavaScript expression is true (it may return a promise), within wait_timeout; needs javascript.", 1024))
	}
	return o
}

// sitePathPattern is wire.ValidSitePath's alphabet, for the catalogue.
const sitePathPattern = "[^\\x00-\\x1f\\x7f\\\\\"<>&'%?#`]{1,255}"

// pdfSchema are the options of renderers that print through Chromium.
func pdfSchema(withJS bool) []Option {
	paper := enumOpt("paper", "Paper size (any case); paper_width and paper_height override it.", "letter", paperNames...)
	paper.CaseInsensitive = true
	o := []Option{
		paper,
		lengthOpt("paper_width", "Paper width.", 1, 200),
		lengthOpt("paper_height", "Paper height.", 1, 200),
		boolOpt("landscape", "Landscape orientation.", false),
		numOpt("margin_mm", "Margin on every side, in millimetres; margin_top, margin_bottom, margin_left and margin_right override it per side.", 10, 0, 50),
		lengthOpt("margin_top", "Top margin.", 0, 10),
		lengthOpt("margin_bottom", "Bottom margin.", 0, 10),
		lengthOpt("margin_left", "Left margin.", 0, 10),
		lengthOpt("margin_right", "Right margin.", 0, 10),
		numOpt("scale", "Scale of the page rendering.", 1, 0.1, 2),
		boolOpt("print_background", "Print background colours and images.", true),
		patternOpt("page_ranges", "Pages to print, e.g. \"1-3,5\"; all when absent.", pageRangesPattern),
		boolOpt("prefer_css_page_size", "Let CSS @page size win over paper.", false),
		textOpt("header_html", "HTML printed at the top of every page, in the top margin; elements with class date, title, url, pageNumber or totalPages are filled in. Styles must be inline; it loads nothing.", 4096),
		textOpt("footer_html", "HTML printed at the bottom of every page, like header_html.", 4096),
		boolOpt("generate_outline", "Add a document outline (bookmarks) from the page's headings.", false),
		boolOpt("tagged", "Make a tagged (accessible) PDF.", false),
		boolOpt("single_page", "Print everything on one page as tall as the content.", false),
	}
	if withJS {
		o = append(o, enumOpt("media", "Emulated CSS media type.", "print", "print", "screen"))
	}
	return append(o, pageOptions(withJS)...)
}

// pdfOptions makes Page.printToPDF's parameters.
func pdfOptions(v Values) *wire.PDFOptions {
	p := papers[v.String("paper")]
	if v.Has("paper_width") {
		p[0] = inches(v.String("paper_width"))
	}
	if v.Has("paper_height") {
		p[1] = inches(v.String("paper_height"))
	}
	side := func(k string) float64 {
		if v.Has(k) {
			return inches(v.String(k))
		}
		return v.Float("margin_mm") / 25.4
	}
	o := &wire.PDFOptions{
		Landscape: v.Bool("landscape"), PrintBackground: v.Bool("print_background"), Scale: v.Float("scale"),
		PaperWidth: p[0], PaperHeight: p[1],
		MarginTop: side("margin_top"), MarginBottom: side("margin_bottom"), MarginLeft: side("margin_left"), MarginRight: side("margin_right"),
		PageRanges: v.String("page_ranges"), PreferCSSPageSize: v.Bool("prefer_css_page_size"),
		GenerateOutline: v.Bool("generate_outline"), GenerateTaggedPDF: v.Bool("tagged"),
	}
	if h, f := v.String("header_html"), v.String("footer_html"); h != "" || f != "" {
		// An empty template is Chromium's default (date and title):
		// the side not asked for is blank.
		o.DisplayHeaderFooter = true
		o.HeaderTemplate, o.FooterTemplate = orBlank(h), orBlank(f)
	}
	return o
}

func orBlank(t string) string {
	if t == "" {
		return "<span></span>"
	}
	return t
}

// checkPrint refuses a sheet the margins fill.
func checkPrint(o *wire.PDFOptions) error {
	w, h := o.PaperWidth, o.PaperHeight
	if o.Landscape {
		w, h = h, w
	}
	if o.MarginLeft+o.MarginRight >= w-0.1 || o.MarginTop+o.MarginBottom >= h-0.1 {
		return fmt.Errorf("%w: the margins (%.2gin + %.2gin across, %.2gin + %.2gin down) leave no room on a %.3gin × %.3gin sheet",
			ErrInvalidOptions, o.MarginLeft, o.MarginRight, o.MarginTop, o.MarginBottom, w, h)
	}
	return nil
}

// browserFor makes the page part of a Chromium request: what it waits for,
// its background, failure rules, and where it is served from.
func browserFor(in inputFile, v Values, l jobspec.Limits, page string) (*wire.Browser, error) {
	b := &wire.Browser{
		Argv: chromiumArgs, Page: page, JavaScript: v.Bool("javascript"), OmitBackground: v.Bool("omit_background"),
		FailOnResourceError: v.Bool("fail_on_resource_error"), FailOnConsoleError: v.Bool("fail_on_console_error"),
	}
	if in.Site != "" {
		b.Site, b.PagePath = in.Site, in.Entry
	}
	b.URL = in.URL
	b.UserAgent = v.String("user_agent")
	for _, f := range []string{"prefers_color_scheme", "prefers_reduced_motion"} {
		if v.Has(f) {
			b.MediaFeatures = append(b.MediaFeatures, wire.MediaFeature{Name: strings.ReplaceAll(f, "_", "-"), Value: v.String(f)})
		}
	}
	if expr := v.String("wait_for_expression"); expr != "" && !b.JavaScript {
		return nil, fmt.Errorf("%w: wait_for_expression needs javascript: true", ErrInvalidOptions)
	}
	w := &wire.Wait{
		DelayMS: int(math.Round(v.Float("wait_delay") * 1000)), Selector: v.String("wait_for_selector"),
		Expression: v.String("wait_for_expression"), TimeoutMS: int(math.Round(v.Float("wait_timeout") * 1000)),
	}
	if w.DelayMS == 0 && w.Selector == "" && w.Expression == "" {
		return b, nil
	}
	longest := w.DelayMS
	if w.Selector != "" || w.Expression != "" {
		longest += w.TimeoutMS
	}
	// The page's load and its print need time too.
	if room := l.Timeout.Milliseconds() - 5000; int64(longest) > room {
		return nil, fmt.Errorf("%w: waiting up to %.1f s leaves too little of the job's %s time limit; lower wait_delay or wait_timeout",
			ErrInvalidOptions, float64(longest)/1000, l.Timeout)
	}
	b.Wait = w
	return b, nil
}

// screenshotFormats maps html-png's format option to its output's
// extension.
var screenshotFormats = map[string]string{"png": "png", "jpeg": "jpg", "webp": "webp"}

func screenshotFor(v Values, l jobspec.Limits) (*wire.Screenshot, error) {
	sc := &wire.Screenshot{Width: v.Int("width"), Height: v.Int("height"), FullPage: v.Bool("full_page"),
		DeviceScaleFactor: v.Float("device_scale_factor"), Format: v.String("format"), MaxPixels: l.MaxPixels,
		Selector: v.String("selector")}
	if sc.Format != "png" {
		sc.Quality = v.Int("quality")
	}
	if px := float64(sc.Width*sc.Height) * sc.DeviceScaleFactor * sc.DeviceScaleFactor; px > float64(l.MaxPixels) {
		return nil, fmt.Errorf("%w: a %d×%d viewport at scale %g is %.0f pixels, over the limit of %d", ErrInvalidOptions, sc.Width, sc.Height, sc.DeviceScaleFactor, px, l.MaxPixels)
	}
	clip := []string{"clip_x", "clip_y", "clip_width", "clip_height"}
	n := 0
	for _, k := range clip {
		if v.Has(k) {
			n++
		}
	}
	switch {
	case n > 0 && (!v.Has("clip_width") || !v.Has("clip_height")):
		return nil, fmt.Errorf("%w: a clip needs clip_width and clip_height (clip_x and clip_y default to 0)", ErrInvalidOptions)
	case n > 0 && sc.Selector != "":
		return nil, fmt.Errorf("%w: clip_* and selector both choose what to capture; give one", ErrInvalidOptions)
	case n > 0 && sc.FullPage:
		return nil, fmt.Errorf("%w: clip_* and full_page both choose what to capture; give one", ErrInvalidOptions)
	case n > 0:
		sc.Clip = &wire.Rect{X: v.Float("clip_x"), Y: v.Float("clip_y"), Width: v.Float("clip_width"), Height: v.Float("clip_height")}
	}
	return sc, nil
}

// screenshotSchema are html-png's options.
func screenshotSchema() []Option {
	o := []Option{
		intOpt("width", "Viewport width in CSS pixels.", 1280, 16, 3840),
		intOpt("height", "Viewport height in CSS pixels.", 800, 16, 4096),
		boolOpt("full_page", "Capture the whole page, not just the viewport.", false),
		numOpt("device_scale_factor", "Device pixels per CSS pixel.", 1, 0.5, 3),
		enumOpt("media", "Emulated CSS media type.", "screen", "print", "screen"),
		enumOpt("format", "Image format: output.png, output.jpg or output.webp.", "png", "png", "jpeg", "webp"),
		intOpt("quality", "JPEG and WebP quality.", 90, 1, 100),
		{Name: "clip_x", Type: "number", Description: "Left of the rectangle to capture, in CSS pixels from the page's left.", Minimum: num(0), Maximum: num(100000)},
		{Name: "clip_y", Type: "number", Description: "Top of the rectangle to capture, in CSS pixels from the page's top.", Minimum: num(0), Maximum: num(100000)},
		{Name: "clip_width", Type: "number", Description: "Width of the rectangle to capture (with clip_height).", Minimum: num(1), Maximum: num(16384)},
		{Name: "clip_height", Type: "number", Description: "Height of the rectangle to capture (with clip_width).", Minimum: num(1), Maximum: num(16384)},
		textOpt("selector", "Capture only the first element this CSS selector matches.", 512),
	}
	return append(o, pageOptions(true)...)
}

// outputExt is the extension html-png's output gets.
func outputExt(v Values) string {
	if e, ok := screenshotFormats[strings.ToLower(v.String("format"))]; ok {
		return e
	}
	return "png"
}
