package render

import (
	"fmt"
	"html"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/renderbox/renderbox/internal/jobspec"
	"github.com/renderbox/renderbox/internal/wire"
)

// chromiumArgs are the flags Chromium needs inside the sandbox: gVisor is
// the sandbox, so Chromium's own is off; nothing may reach out. The agent
// adds --remote-debugging-pipe and drives it over DevTools. It is the
// headless shell in one process, because every sandboxed process costs
// dearly under systrap and a second would add no isolation
// (docs/design.md, "Chromium in one process").
var chromiumArgs = []string{
	"/usr/lib/chromium/chromium-headless-shell",
	"--headless",
	"--single-process",
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
	"--password-store=basic",
	"--user-data-dir=" + wire.WorkDir + "/chromium",
	// No JIT for the page's JavaScript (when a job turns it on): V8's
	// optimising compilers are where most of its exploitable bugs live
	// (docs/design.md, "Chromium in one process", for its cost).
	// WebAssembly does not run without the JIT.
	"--js-flags=--jitless",
}

var chromiumEnv = []string{
	"PATH=/usr/bin:/bin",
	"HOME=" + wire.WorkDir,
	"XDG_CACHE_HOME=" + wire.WorkDir + "/.cache",
	"XDG_CONFIG_HOME=" + wire.WorkDir + "/.config",
	"DBUS_SESSION_BUS_ADDRESS=disabled:",
	"LANG=C.UTF-8",
}

var plainEnv = []string{"PATH=/usr/bin:/bin", "HOME=" + wire.WorkDir, "LANG=C.UTF-8"}

// officeEnv is LibreOffice's: no display, its headless backend.
var officeEnv = append([]string{"SAL_USE_VCLPLUGIN=svp"}, plainEnv...)

// Chromium, one process of many threads, gets both cores and room for them.
var chromiumLimits = jobspec.Limits{Timeout: 60 * time.Second, MemoryBytes: 2 << 30, CPUs: 2, Pids: 1024, TmpBytes: 512 << 20}

// pageRangesPattern is a list of pages and page ranges, "1-3,5".
const pageRangesPattern = `[1-9][0-9]{0,4}(-[1-9][0-9]{0,4})?(,[1-9][0-9]{0,4}(-[1-9][0-9]{0,4})?){0,49}`

// cmark renders Markdown safely: raw HTML is not passed through (no
// --unsafe), and the tagfilter extension escapes the dangerous tags GFM
// would otherwise allow.
func cmarkSteps(in inputFile, v Values, dest string) []wire.Step {
	argv := []string{"/usr/bin/cmark-gfm", "--to", "html", "--validate-utf8",
		"--extension", "table", "--extension", "strikethrough", "--extension", "autolink",
		"--extension", "tagfilter", "--extension", "tasklist"}
	if v.Bool("smart") {
		argv = append(argv, "--smart")
	}
	if v.Bool("hardbreaks") {
		argv = append(argv, "--hardbreaks")
	}
	argv = append(argv, in.page())
	steps := []wire.Step{{Argv: argv, Stdout: wire.WorkDir + "/body.html"}}
	// The page wrapper ships in the rootfs (rootfs/files): no shell, no
	// template built from user data.
	// markdown-html's page loads nothing; the page Chromium prints may
	// load the job's files.
	csp := "/usr/share/renderbox/markdown-csp.html"
	if dest == printPage {
		csp = "/usr/share/renderbox/markdown-print-csp.html"
	}
	parts := []string{"/bin/cat", "/usr/share/renderbox/markdown-open.html", csp}
	if dest == printPage {
		// The printed page's <title> is the PDF's Title (Chromium's),
		// which was the page's URL, document.renderbox.invalid.
		steps = append(steps, titleSteps(in, v)...)
		parts = append(parts, wire.WorkDir+"/title.html")
	}
	parts = append(parts, "/usr/share/renderbox/markdown-style.html")
	if css := v.String("stylesheet"); css != "" {
		// After the built-in style, so it wins. The path is a site path:
		// nothing in it needs escaping in an attribute, and printf
		// takes it as an argument, not as its format.
		steps = append(steps, wire.Step{Argv: []string{"/usr/bin/printf", `<link rel="stylesheet" href="/%s">\n`, css}, Stdout: wire.WorkDir + "/style.html"})
		parts = append(parts, wire.WorkDir+"/style.html")
	}
	parts = append(parts, wire.WorkDir+"/body.html", "/usr/share/renderbox/markdown-tail.html")
	return append(steps, wire.Step{Argv: parts, Stdout: dest})
}

// firstHeading is the sed script that makes a <title> of the first heading
// in cmark's HTML (its text: tags dropped, entities kept, which a title
// decodes), or else of the last line of what follows, the fallback's
// file. Fixed: no user data is ever part of it.
const firstHeading = `/<h[1-6][ >]/{s/^.*<h[1-6][^>]*>//;s/<\/h[1-6]>.*$//;s/<[^>]*>//g;s/^[[:space:]]+|[[:space:]]+$//g;/^$/d;s/.*/<title>&<\/title>/p;q}
${s/.*/<title>&<\/title>/p}`

// titleSteps write markdown-pdf's <title> to title.html: the title option
// when given, else the document's first heading, else the outputs' name
// without its extension (the job's output_name, or "output"). The text
// reaches the sandbox as printf's argument, never its format, escaped for
// HTML and without control characters.
func titleSteps(in inputFile, v Values) []wire.Step {
	title := wire.WorkDir + "/title.html"
	if t := v.String("title"); t != "" {
		return []wire.Step{{Argv: []string{"/usr/bin/printf", "<title>%s</title>\n", htmlText(t)}, Stdout: title}}
	}
	name := in.Name
	if name == "" {
		name = "output"
	}
	fallback := wire.WorkDir + "/title-fallback.txt"
	return []wire.Step{
		{Argv: []string{"/usr/bin/printf", "%s\n", htmlText(name)}, Stdout: fallback},
		{Argv: []string{"/bin/sed", "-n", "-E", "-e", firstHeading, wire.WorkDir + "/body.html", fallback}, Stdout: title},
	}
}

// htmlText is s as the text of an HTML element, on one line.
func htmlText(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	return html.EscapeString(s)
}

// chromiumPDF is the request that prints page (a file under /tmp).
func chromiumPDF(in inputFile, v Values, l jobspec.Limits, page string) (wire.Request, error) {
	b, err := browserFor(in, v, l, page)
	if err != nil {
		return wire.Request{}, err
	}
	b.PDF, b.SinglePage, b.Media, b.Output = pdfOptions(v), v.Bool("single_page"), v.String("media"), "output.pdf"
	if err := checkPrint(b.PDF); err != nil {
		return wire.Request{}, err
	}
	return wire.Request{Env: chromiumEnv, Browser: b}, nil
}

// printPage is the page markdown-pdf has Chromium print.
const printPage = wire.WorkDir + "/document.html"

var markdownSchema = []Option{
	boolOpt("smart", "Smart punctuation: curly quotes, dashes, ellipses.", false),
	boolOpt("hardbreaks", "Treat newlines inside paragraphs as line breaks.", false),
}

// svgLinks is the rootfs's script that drops unsafe links from an SVG.
const svgLinks = "/usr/local/lib/renderbox/svg-links.py"

// pdftoppmArgv is pdf-png's program: pages first to last of the PDF on
// stdin at dpi, to page-N.png (or .jpg at quality).
func pdftoppmArgv(dpi, first, last int, format string, quality int) []string {
	argv := []string{"/usr/bin/pdftoppm", "-r", strconv.Itoa(dpi), "-f", strconv.Itoa(first), "-l", strconv.Itoa(last)}
	if format == "jpeg" {
		argv = append(argv, "-jpeg", "-jpegopt", "quality="+strconv.Itoa(quality))
	} else {
		argv = append(argv, "-png")
	}
	return append(argv, "-", wire.OutputDir+"/page")
}

// pageRe matches pdftoppm's zero-padded page numbers.
var pageRe = regexp.MustCompile(`^page-0*([1-9][0-9]{0,5})\.(png|jpg)$`)

var colorPattern = `#[0-9a-fA-F]{6}([0-9a-fA-F]{2})?`

var layouts = []string{"dot", "neato", "fdp", "sfdp", "circo", "twopi", "osage", "patchwork"}

func svgArgs(format, out string, in inputFile, v Values) []string {
	argv := []string{"/usr/bin/rsvg-convert", "--format=" + format, "--output=" + out}
	if v.Has("width") {
		argv = append(argv, "--width="+strconv.Itoa(v.Int("width")))
	}
	if v.Has("height") {
		argv = append(argv, "--height="+strconv.Itoa(v.Int("height")))
	}
	if v.Has("width") && v.Has("height") && v.Bool("keep_aspect_ratio") {
		argv = append(argv, "--keep-aspect-ratio")
	}
	if z := v.Float("zoom"); z != 1 && z != 0 {
		argv = append(argv, "--zoom="+strconv.FormatFloat(z, 'f', -1, 64))
	}
	if bg := v.String("background"); bg != "" {
		argv = append(argv, "--background-color="+bg)
	}
	return append(argv, in.Path)
}

// resolve fills a renderer's zero limits with the defaults as it joins the
// catalogue or the diagnostics: every plan, pool family and listing reads
// them from there without resolving them again.
func resolve(r *Renderer) *Renderer {
	r.Limits = r.Limits.WithDefaults()
	return r
}

// The entries written out below and in diagnostics.go are resolved here;
// the others as their files add them.
func init() {
	for _, r := range catalogue {
		resolve(r)
	}
	for _, r := range diagnostics {
		resolve(r)
	}
}

var catalogue = map[string]*Renderer{
	"html-pdf": {
		Name:          "html-pdf",
		Description:   "Print an HTML page to PDF with headless Chromium. The page can load nothing but itself and, given a ZIP or several files, those files. Output: output.pdf.",
		Inputs:        []string{TypeHTML, TypeZIP},
		Output:        TypePDF,
		Options:       append(pdfSchema(true), urlOptions()...),
		MaxInputBytes: 50 << 20,
		Limits:        chromiumLimits,
		site:          htmlSite,
		urls:          true,
		build: func(in inputFile, v Values, l jobspec.Limits) (wire.Request, error) {
			return chromiumPDF(in, v, l, in.page())
		},
	},
	"html-png": {
		Name:          "html-png",
		Description:   "Screenshot an HTML page with headless Chromium, as PNG, JPEG or WebP. The page can load nothing but itself and, given a ZIP or several files, those files. Output: output.png (.jpg, .webp).",
		Inputs:        []string{TypeHTML, TypeZIP},
		Output:        TypePNG,
		MaxInputBytes: 50 << 20,
		MaxPixels:     40_000_000,
		Options:       append(screenshotSchema(), urlOptions()...),
		Limits:        chromiumLimits,
		site:          htmlSite,
		urls:          true,
		build: func(in inputFile, v Values, l jobspec.Limits) (wire.Request, error) {
			sc, err := screenshotFor(v, l)
			if err != nil {
				return wire.Request{}, err
			}
			b, err := browserFor(in, v, l, in.page())
			if err != nil {
				return wire.Request{}, err
			}
			b.Media, b.Output, b.Screenshot = v.String("media"), "output."+outputExt(v), sc
			return wire.Request{Env: chromiumEnv, Browser: b}, nil
		},
	},
	"markdown-html": {
		Name:          "markdown-html",
		Description:   "Render Markdown (CommonMark + GFM tables, strikethrough, autolinks, task lists) to a standalone HTML page; raw HTML is not passed through. Output: output.html.",
		Inputs:        []string{TypeText, TypeMarkdown, TypeHTML},
		Output:        "text/html",
		Options:       markdownSchema,
		MaxInputBytes: 5 << 20,
		Limits:        jobspec.Limits{Timeout: 30 * time.Second, MemoryBytes: 512 << 20, TmpBytes: lightTmp},
		build: func(in inputFile, v Values, _ jobspec.Limits) (wire.Request, error) {
			return wire.Request{Env: plainEnv, Steps: cmarkSteps(in, v, wire.OutputDir+"/output.html")}, nil
		},
	},
	"markdown-pdf": {
		Name:        "markdown-pdf",
		Description: "Render Markdown (CommonMark + GFM) to PDF: cmark-gfm, then Chromium with JavaScript off. Given a ZIP or several files, the document's images and a stylesheet come from them. Output: output.pdf.",
		Inputs:      []string{TypeText, TypeMarkdown, TypeHTML, TypeZIP},
		Output:      TypePDF,
		Options: append(append(append([]Option{}, markdownSchema...),
			patternOpt("stylesheet", "With a ZIP or several files: a CSS file among them to style the document, after the built-in style.", sitePathPattern),
			textOpt("title", "The PDF's title (and a header or footer's title element). Default: the document's first heading, else the output's name without its extension.", 1000)),
			pdfSchema(false)...),
		MaxInputBytes: 20 << 20,
		Limits:        chromiumLimits,
		site:          markdownSite,
		build: func(in inputFile, v Values, l jobspec.Limits) (wire.Request, error) {
			req, err := chromiumPDF(in, v, l, printPage)
			if err != nil {
				return req, err
			}
			req.Steps, req.Browser.Media = cmarkSteps(in, v, printPage), "print"
			return req, nil
		},
	},
	"pdf-png": {
		Name:          "pdf-png",
		Description:   "Rasterise the pages of a PDF with poppler's pdftoppm. Outputs: page-1.png, page-2.png, … (page-N.jpg for JPEG).",
		Inputs:        []string{TypePDF},
		Output:        TypePNG,
		MaxInputBytes: 50 << 20,
		MaxPages:      100,
		Options: []Option{
			enumOpt("format", "Image format.", "png", "png", "jpeg"),
			intOpt("dpi", "Resolution in dots per inch.", 150, 36, 600),
			intOpt("first_page", "First page to render.", 1, 1, 100000),
			{Name: "last_page", Type: "integer", Description: "Last page to render; at most first_page + max_pages - 1.", Minimum: num(1), Maximum: num(100000)},
			intOpt("quality", "JPEG quality.", 90, 1, 100),
		},
		Limits: jobspec.Limits{Timeout: 60 * time.Second, MemoryBytes: 1 << 30, TmpBytes: lightTmp},
		build: func(in inputFile, v Values, l jobspec.Limits) (wire.Request, error) {
			first := v.Int("first_page")
			last := first + l.MaxPages - 1
			if v.Has("last_page") {
				if v.Int("last_page") < first {
					return wire.Request{}, fmt.Errorf("%w: last_page %d is before first_page %d", ErrInvalidOptions, v.Int("last_page"), first)
				}
				last = min(last, v.Int("last_page"))
			}
			// The PDF on stdin ("-"), which pdftoppm reads whole before it
			// parses it: so a pool sandbox can have started this very
			// program before the job (primedWarm).
			return wire.Request{Env: plainEnv, Steps: []wire.Step{{
				Argv: pdftoppmArgv(v.Int("dpi"), first, last, v.String("format"), v.Int("quality")), Stdin: in.Path,
			}}}, nil
		},
	},
	"svg-png": {
		Name:          "svg-png",
		Description:   "Render an SVG image to PNG with librsvg. Output: output.png.",
		Inputs:        []string{TypeSVG},
		Output:        TypePNG,
		MaxInputBytes: 10 << 20,
		Options: []Option{
			{Name: "width", Type: "integer", Description: "Output width in pixels (default: the SVG's own).", Minimum: num(1), Maximum: num(8192)},
			{Name: "height", Type: "integer", Description: "Output height in pixels (default: the SVG's own).", Minimum: num(1), Maximum: num(8192)},
			boolOpt("keep_aspect_ratio", "With both width and height, keep the SVG's aspect ratio.", true),
			numOpt("zoom", "Zoom factor.", 1, 0.1, 10),
			patternOpt("background", "Background colour as #rrggbb or #rrggbbaa (default: transparent).", colorPattern),
		},
		Limits: jobspec.Limits{Timeout: 30 * time.Second, MemoryBytes: 512 << 20, TmpBytes: lightTmp},
		build: func(in inputFile, v Values, _ jobspec.Limits) (wire.Request, error) {
			return wire.Request{Env: plainEnv, Steps: []wire.Step{{Argv: svgArgs("png", wire.OutputDir+"/output.png", in, v)}}}, nil
		},
	},
	"svg-pdf": {
		Name:          "svg-pdf",
		Description:   "Render an SVG image to PDF with librsvg. Output: output.pdf.",
		Inputs:        []string{TypeSVG},
		Output:        TypePDF,
		MaxInputBytes: 10 << 20,
		Options: []Option{
			numOpt("zoom", "Zoom factor.", 1, 0.1, 10),
			patternOpt("background", "Background colour as #rrggbb or #rrggbbaa (default: none).", colorPattern),
		},
		Limits: jobspec.Limits{Timeout: 30 * time.Second, MemoryBytes: 512 << 20, TmpBytes: lightTmp},
		build: func(in inputFile, v Values, _ jobspec.Limits) (wire.Request, error) {
			return wire.Request{Env: plainEnv, Steps: []wire.Step{{Argv: svgArgs("pdf", wire.OutputDir+"/output.pdf", in, v)}}}, nil
		},
	},
	"dot-svg": {
		Name:          "dot-svg",
		Description:   "Lay out a Graphviz graph and draw it as SVG. Output: output.svg.",
		Inputs:        []string{TypeDOT},
		Output:        TypeSVG,
		MaxInputBytes: 2 << 20,
		Options:       []Option{enumOpt("layout", "Layout engine.", "dot", layouts...)},
		Limits:        jobspec.Limits{Timeout: 30 * time.Second, MemoryBytes: 512 << 20, TmpBytes: lightTmp},
		build: func(in inputFile, v Values, _ jobspec.Limits) (wire.Request, error) {
			// Links whose target is not http(s), mailto or a fragment
			// (URL="javascript:…") are dropped from the SVG, in the
			// sandbox, before it is an output.
			graph := wire.WorkDir + "/graph.svg"
			return wire.Request{Env: plainEnv, Steps: []wire.Step{
				{Argv: []string{"/usr/bin/dot", "-K" + v.String("layout"), "-Tsvg", "-o", graph, in.Path}},
				{Argv: []string{"/usr/bin/python3", "-I", svgLinks, graph, wire.OutputDir + "/output.svg"}},
			}}, nil
		},
	},
	"dot-png": {
		Name:          "dot-png",
		Description:   "Lay out a Graphviz graph and draw it as PNG. Output: output.png.",
		Inputs:        []string{TypeDOT},
		Output:        TypePNG,
		MaxInputBytes: 2 << 20,
		Options: []Option{
			enumOpt("layout", "Layout engine.", "dot", layouts...),
			intOpt("dpi", "Resolution in dots per inch.", 96, 36, 300),
		},
		Limits: jobspec.Limits{Timeout: 30 * time.Second, MemoryBytes: 512 << 20, TmpBytes: lightTmp},
		build: func(in inputFile, v Values, _ jobspec.Limits) (wire.Request, error) {
			return wire.Request{Env: plainEnv, Steps: []wire.Step{{Argv: []string{
				"/usr/bin/dot", "-K" + v.String("layout"), "-Tpng", "-Gdpi=" + strconv.Itoa(v.Int("dpi")),
				"-o", wire.OutputDir + "/output.png", in.Path,
			}}}}, nil
		},
	},
	"image-thumbnail": {
		Name:          "image-thumbnail",
		Description:   "Shrink an image (PNG, JPEG, WebP, GIF, TIFF) to fit a box with libvips, metadata stripped. Images over max_pixels are refused from their header, before decoding. Output: thumbnail.png, .jpg or .webp.",
		Inputs:        []string{TypePNG, TypeJPEG, TypeWebP, TypeGIF, TypeTIFF},
		Output:        TypePNG,
		MaxInputBytes: 50 << 20,
		MaxPixels:     50_000_000,
		Options: []Option{
			intOpt("width", "Largest width in pixels.", 256, 1, 4096),
			intOpt("height", "Largest height in pixels.", 256, 1, 4096),
			enumOpt("format", "Output format.", "png", "png", "jpeg", "webp"),
			intOpt("quality", "JPEG/WebP quality.", 85, 1, 100),
			enumOpt("crop", "Fill the box exactly by cropping: none, centre or attention (the most interesting part).", "none", "none", "centre", "attention"),
		},
		Limits: jobspec.Limits{Timeout: 30 * time.Second, MemoryBytes: 1 << 30, TmpBytes: lightTmp},
		check:  checkImagePixels,
		build: func(in inputFile, v Values, _ jobspec.Limits) (wire.Request, error) {
			ext, opts := "png", "[strip]"
			switch v.String("format") {
			case "jpeg":
				ext, opts = "jpg", "[Q="+strconv.Itoa(v.Int("quality"))+",strip]"
			case "webp":
				ext, opts = "webp", "[Q="+strconv.Itoa(v.Int("quality"))+",strip]"
			}
			argv := []string{"/usr/bin/vipsthumbnail", in.Path,
				"--size", strconv.Itoa(v.Int("width")) + "x" + strconv.Itoa(v.Int("height"))}
			if c := v.String("crop"); c != "none" {
				argv = append(argv, "--smartcrop", c)
			}
			argv = append(argv, "-o", wire.OutputDir+"/thumbnail."+ext+opts)
			// libvips refuses its loaders that are not fuzzed for hostile input.
			env := append([]string{"VIPS_BLOCK_UNTRUSTED=1", "VIPS_CONCURRENCY=1"}, plainEnv...)
			return wire.Request{Env: env, Steps: []wire.Step{{Argv: argv}}}, nil
		},
	},
	"office-pdf": {
		Name:          "office-pdf",
		Description:   fmt.Sprintf("Convert an office document to PDF with LibreOffice, macros off: Word, Excel and PowerPoint (OOXML, their macro-enabled and template variants, the binary 97–2003 formats, and OOXML encrypted with a password), OpenDocument (packaged, templates, flat XML; text, spreadsheet, presentation, drawing), StarOffice XML, RTF. Each is told from its bytes. Several documents (file parts, or a ZIP's stored entries; at most %d, PDFs among them taken as they are) are converted in order by one LibreOffice and merged into one PDF, the options applying to each, with a bookmark per document when bookmarks or titles asks. Output: output.pdf.", maxOfficeDocs),
		Inputs:        append([]string{TypeZIP}, officeInputs...),
		Output:        TypePDF,
		Options:       officeSchema,
		MaxInputBytes: 50 << 20,
		Limits:        jobspec.Limits{Timeout: 120 * time.Second, MemoryBytes: 2 << 30, CPUs: 2, Pids: 1024, TmpBytes: 512 << 20},
		parts:         true,
		typedParts:    officeParts,
		build: func(in inputFile, v Values, _ jobspec.Limits) (wire.Request, error) {
			// The agent runs LibreOffice itself: one booted before the job
			// when the sandbox was, else one booted for it.
			if len(in.Files) == 0 && !v.Bool("bookmarks") && !v.Has("titles") {
				return wire.Request{
					Env:    officeEnv,
					Office: &wire.Office{Input: in.Path, OutDir: wire.OutputDir, Format: wire.OfficePDF, Options: officeOptions(in, v)},
				}, nil
			}
			return officeMerge(in, v)
		},
	},
}
