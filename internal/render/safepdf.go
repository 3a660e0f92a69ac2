package render

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/renderbox/renderbox/internal/jobspec"
	"github.com/renderbox/renderbox/internal/wire"
)

// safe-pdf is Dangerzone's method: the document is drawn to
// pixels in one sandbox, and a PDF is rebuilt from those pixels alone in
// another, fresh one. Office documents, HTML pages and SVG images are first
// converted to PDF by office-pdf's, html-pdf's and svg-pdf's request in a
// sandbox of their own.
// Between the stages the host checks what came back: the pixel stage may
// return raw frames only (netpbm P6 or P5, the header as pdftoppm writes
// it, the pixel bytes exactly width × height × channels), and the host
// writes each frame anew (its own header, the pixel bytes) into the
// rebuild stage's input. No byte of the original document reaches the
// rebuild, so none reaches the output.

// Stage names of safe-pdf, as the job's record lists them.
const (
	StageConvert   = "convert"   // office or HTML → PDF
	StageRasterize = "rasterize" // PDF or image → raw pixels
	StageRebuild   = "rebuild"   // raw pixels → PDF
)

// safePDF bounds.
const (
	// safePDFMaxPixelBytes bounds the raw pixels of all pages together: the
	// host's spill file holds them (frames.go), and the rebuild's /tmp
	// (lightTmp) holds them twice, packed and unpacked.
	safePDFMaxPixelBytes = 200 << 20
	// safePDFMaxSide bounds a page's side in pixels: the script refuses a
	// page over it (or over max_pixels) at the job's dpi, pdftoppm crops at
	// it (-W -H), and the host refuses a frame over it.
	safePDFMaxSide = 10000
	// safePDFFrameName is a frame's name as pdftoppm writes it, its page
	// number zero-padded to the width of the document's page count.
	safePDFFrameName = `^page-0*([1-9][0-9]{0,5})\.(ppm|pgm)$`
)

// ocrLanguages are the Tesseract packs in the rootfs.
var ocrLanguages = []string{"eng", "deu", "fra", "spa"}

var safePDFFrameRe = regexp.MustCompile(safePDFFrameName)

// stage is a sandbox run of a job after its first (Plan.Job).
type stage struct {
	name   string
	family string
	// next builds the stage's job from the files the stage before it
	// returned, checked on the host; an error wraps ErrBadOutput.
	next func(p *Plan, files []wire.File) (Stage, error)
}

// Stage is a sandbox run of a job that takes several (safe-pdf): the host
// runs each in a fresh sandbox and builds the next from what the last
// returned.
type Stage struct {
	Name   string
	Family string
	Job    jobspec.Job // its Input is set
	// Input is what Job.Input reads, its first Job.Request.InputSize
	// bytes, to run the stage again cold when a pooled sandbox breaks.
	Input io.ReaderAt
}

// Stages names the job's sandbox runs in order: a renderer that runs in
// one sandbox has one stage, named after it.
func (p *Plan) Stages() []string {
	names := []string{p.firstStage}
	if p.firstStage == "" {
		names[0] = p.Renderer.Name
	}
	for _, s := range p.stages {
		names = append(names, s.name)
	}
	return names
}

// FirstFamily is the pool the first stage's sandbox may come from.
func (p *Plan) FirstFamily() string {
	if p.firstFamily != "" {
		return p.firstFamily
	}
	return p.Renderer.Family()
}

// Next builds stage i+1's job (i counts from 0, the first stage) from the
// files stage i returned. An error wraps ErrBadOutput: nothing of such a
// stage is kept.
func (p *Plan) Next(i int, files []wire.File) (Stage, error) {
	if i < 0 || i >= len(p.stages) {
		return Stage{}, fmt.Errorf("%w: %s has no stage after %d", ErrBadOutput, p.Renderer.Name, i+1)
	}
	s, err := p.stages[i].next(p, files)
	s.Name, s.Family = p.stages[i].name, p.stages[i].family
	return s, err
}

// safePDFConverters are the catalogue renderers whose request turns an
// input type into the PDF the pixel stage draws.
func safePDFConverter(typ string) string {
	switch {
	case typ == TypeHTML:
		return "html-pdf"
	case typ == TypeSVG:
		return "svg-pdf"
	case slices.Contains(officeInputs, typ):
		return "office-pdf"
	}
	return ""
}

var safePDFImages = []string{TypePNG, TypeJPEG, TypeWebP, TypeGIF, TypeTIFF}

func safePDFInputs() []string {
	in := []string{TypePDF, TypeHTML, TypeSVG}
	in = append(in, safePDFImages...)
	for _, t := range officeInputs {
		if !slices.Contains(in, t) {
			in = append(in, t)
		}
	}
	return in
}

// safePDFPixels is the rootfs's script that checks a PDF's page count and
// page sizes against the job's limits and has pdftoppm draw its pages.
const safePDFPixels = "/usr/local/lib/renderbox/safe-pdf-pixels.py"

// rasterizeSteps draw pdf's pages as raw netpbm frames, page-N.ppm (RGB)
// or page-N.pgm (gray), after the script has refused a document of more
// than max_pages pages or a page over max_pixels at the job's dpi, saying
// which. Whatever it writes, the host checks the frames again.
func rasterizeSteps(pdf string, v Values, l jobspec.Limits) []wire.Step {
	mode := "rgb"
	if v.Bool("grayscale") {
		mode = "gray"
	}
	return []wire.Step{{Argv: []string{"/usr/bin/python3", "-I", safePDFPixels, pdf, wire.OutputDir + "/page",
		strconv.Itoa(v.Int("dpi")), strconv.Itoa(l.MaxPages), strconv.FormatInt(l.MaxPixels, 10), strconv.Itoa(safePDFMaxSide), mode}}}
}

// imageSteps put an image on a page of its own (alpha flattened on white,
// sRGB, 8 bits, then img2pdf at the image's resolution) and draw it as
// a PDF is drawn.
func imageSteps(in inputFile, v Values, l jobspec.Limits) []wire.Step {
	// Uncompressed TIFF between the steps: VIPS_BLOCK_UNTRUSTED refuses
	// libvips' own .v format.
	flat, rgb, png, pdf := wire.WorkDir+"/flat.tif", wire.WorkDir+"/rgb.tif", wire.WorkDir+"/page.png", wire.WorkDir+"/page.pdf"
	steps := []wire.Step{
		{Argv: []string{"/usr/bin/vips", "flatten", in.Path, flat, "--background", "255"}},
		{Argv: []string{"/usr/bin/vips", "colourspace", flat, rgb, "srgb"}},
		{Argv: []string{"/usr/bin/vips", "cast", rgb, png, "uchar"}},
		{Argv: []string{"/usr/bin/img2pdf", "--nodate", "-o", pdf, png}},
	}
	return append(steps, rasterizeSteps(pdf, v, l)...)
}

var vipsEnv = append([]string{"VIPS_BLOCK_UNTRUSTED=1", "VIPS_CONCURRENCY=1"}, plainEnv...)

// jpegPaths are where the rebuild writes n pages as JPEG.
func jpegPaths(n int) []string {
	var ps []string
	for i := range n {
		ps = append(ps, fmt.Sprintf("%s/page-%04d.jpg", wire.WorkDir, i+1))
	}
	return ps
}

// rebuildRequest makes a PDF of the pages: img2pdf at the job's dpi, each
// page as large as the original's; with ocr, Tesseract's PDF instead, the
// same pixels under a searchable text layer. With jpeg_quality, libvips
// first encodes each page as JPEG, which both embed as it is (DCT);
// without, the pages are compressed losslessly (Flate).
func rebuildRequest(paths []string, v Values) wire.Request {
	dpi := strconv.Itoa(v.Int("dpi"))
	out := wire.OutputDir + "/output"
	var steps []wire.Step
	list, pages := siteDir+"/pages.txt", paths
	if v.Has("jpeg_quality") {
		list, pages = siteDir+"/jpeg.txt", jpegPaths(len(paths))
		for i, p := range paths {
			steps = append(steps, wire.Step{Argv: []string{"/usr/bin/vips", "jpegsave", p, pages[i], "--Q", strconv.Itoa(v.Int("jpeg_quality")), "--strip"}})
		}
	}
	// One thread each: every thread is costly under gVisor, and the
	// sandbox has one CPU. libvips reads the host's frames with its PPM
	// loader, which VIPS_BLOCK_UNTRUSTED would refuse: the header is the
	// host's, the rest pixels.
	env := append([]string{"OMP_THREAD_LIMIT=1", "VIPS_CONCURRENCY=1"}, plainEnv...)
	if v.Bool("ocr") {
		steps = append(steps, wire.Step{Argv: []string{"/usr/bin/tesseract", list, out, "--dpi", dpi, "-l", v.String("ocr_language"), "pdf"}})
		return wire.Request{Env: env, Steps: steps}
	}
	argv := []string{"/usr/bin/img2pdf", "--nodate", "--imgsize", dpi + "dpix" + dpi + "dpi", "-o", out + ".pdf"}
	return wire.Request{Env: env, Steps: append(steps, wire.Step{Argv: append(argv, pages...)})}
}

// rebuildStage checks the pixel stage's frames, which went to the plan's
// spool as they arrived, and makes the rebuild's job: its input is the
// spool's ZIP.
func rebuildStage(p *Plan, files []wire.File) (Stage, error) {
	pages, size, paths, err := p.frames.finish(files, p.Limits.MaxPages)
	if err != nil {
		return Stage{}, err
	}
	req := rebuildRequest(paths, p.Options)
	req.Mode, req.InputName, req.InputSize = wire.ModeRender, "pages.zip", size
	req.Unpack = &wire.Unpack{Archive: wire.InputDir + "/pages.zip", Dir: siteDir, MaxFiles: len(paths) + 2, MaxBytes: size}
	return Stage{Job: jobspec.Job{Request: req, Limits: p.Limits, Input: io.NewSectionReader(pages, 0, size)}, Input: pages}, nil
}

// rasterizeStage takes the converter's PDF (checked as its renderer's
// output) and makes the pixel stage's job.
func rasterizeStage(p *Plan, files []wire.File) (Stage, error) {
	conv, _ := Lookup(safePDFConverter(p.InputType))
	outs, err := conv.AcceptOutputs(files)
	if err != nil {
		return Stage{}, err
	}
	pdf := outs[0].Data
	path := wire.InputDir + "/document.pdf"
	req := wire.Request{Env: plainEnv, Steps: rasterizeSteps(path, p.Options, p.Limits)}
	req.Mode, req.InputName, req.InputSize = wire.ModeRender, "document.pdf", int64(len(pdf))
	job := jobspec.Job{Request: req, Limits: rasterizeLimits(p.Limits), Input: bytes.NewReader(pdf), Spool: p.frames}
	return Stage{Job: job, Input: bytes.NewReader(pdf)}, nil
}

// rasterizeLimits are the pixel stage's: the job's, but room for the raw
// pages whatever max_output_bytes says (it bounds the PDF the job makes).
func rasterizeLimits(l jobspec.Limits) jobspec.Limits {
	s := l
	s.MaxOutputBytes = safePDFMaxPixelBytes
	s.MaxOutputFiles = l.MaxPages + 1
	return s
}

// checkImagePixels refuses an image whose header announces more than
// max_pixels, before anything decodes it.
func checkImagePixels(input []byte, l jobspec.Limits) error {
	w, h, err := imageSize(input)
	if err != nil {
		return fmt.Errorf("%w: cannot read the image's header: %v", ErrInvalidInput, err)
	}
	if int64(w)*int64(h) > l.MaxPixels {
		return fmt.Errorf("%w: the image is %d×%d = %d pixels, over the limit of %d", ErrInputTooLarge, w, h, int64(w)*int64(h), l.MaxPixels)
	}
	return nil
}

func safePDFRenderer() *Renderer {
	return &Renderer{
		Name: "safe-pdf",
		Description: "Rebuild a document as a PDF of its pixels, Dangerzone's method: PDF, images, HTML, SVG and office documents are drawn to raw pixels in one sandbox " +
			"(HTML, SVG and office documents converted to PDF first, in one of their own), the host checks the pixel frames, and a fresh sandbox rebuilds a PDF from them alone " +
			"(img2pdf, or Tesseract with ocr: a searchable text layer). Nothing of the original but its look reaches the output: no script, link, form, attachment or metadata. Output: output.pdf.",
		Inputs:        safePDFInputs(),
		Output:        TypePDF,
		MaxInputBytes: 50 << 20,
		MaxPages:      100,
		MaxPixels:     35_000_000,
		Options: []Option{
			intOpt("dpi", "Resolution the pages are drawn at, in dots per inch; the rebuilt pages keep the original's size.", 150, 50, 300),
			boolOpt("grayscale", "Draw the pages in shades of grey (a third of the pixels to carry).", false),
			boolOpt("ocr", "Recognise the text with Tesseract and lay it under the pixels, so that the PDF is searchable.", false),
			enumOpt("ocr_language", "The language Tesseract reads with ocr.", "eng", ocrLanguages...),
			{Name: "jpeg_quality", Type: "integer", Minimum: num(10), Maximum: num(95),
				Description: "Compress the pages as JPEG of this quality (smaller, lossy); absent, they are compressed losslessly."},
		},
		// Per stage; the pixel stage may return up to 200 MiB of raw pages.
		Limits: jobspec.Limits{Timeout: 120 * time.Second, MemoryBytes: 1536 << 20, TmpBytes: lightTmp},
		check: func(input []byte, l jobspec.Limits) error {
			if !slices.Contains(safePDFImages, Sniff(input)) {
				return nil
			}
			return checkImagePixels(input, l)
		},
		build: func(in inputFile, v Values, l jobspec.Limits) (wire.Request, error) {
			switch conv := safePDFConverter(in.Type); {
			case conv != "":
				r, _ := Lookup(conv)
				cv, err := validate(conv, r.Options, nil)
				if err != nil {
					return wire.Request{}, err
				}
				cl, err := r.EffectiveLimits(LimitRequest{})
				if err != nil {
					return wire.Request{}, err
				}
				return r.build(in, cv, cl)
			case in.Type == TypePDF:
				return wire.Request{Env: plainEnv, Steps: rasterizeSteps(in.Path, v, l)}, nil
			default:
				return wire.Request{Env: vipsEnv, Steps: imageSteps(in, v, l)}, nil
			}
		},
	}
}

// convertLimits are the convert stage's: its renderer's, lowered to the
// job's time and memory where the request lowered those below them.
func convertLimits(r *Renderer, req LimitRequest, job jobspec.Limits) jobspec.Limits {
	l := r.Limits
	if req.TimeoutSeconds > 0 {
		l.Timeout = min(l.Timeout, job.Timeout)
	}
	if req.MemoryBytes > 0 {
		l.MemoryBytes = min(l.MemoryBytes, job.MemoryBytes)
	}
	return l
}

// safePDFPlan fills in a safe-pdf plan's stages after the first, and the
// spool that takes the pixel stage's frames.
func safePDFPlan(p *Plan) {
	p.frames = newFrameSpool(p.Options.Bool("grayscale"), p.Limits.MaxPixels)
	if conv := safePDFConverter(p.InputType); conv != "" {
		r, _ := Lookup(conv)
		p.firstStage, p.firstFamily = StageConvert, r.Family()
		p.Job.Limits = convertLimits(r, p.Request, p.Limits)
		p.stages = append(p.stages, stage{name: StageRasterize, family: FamilyLight, next: rasterizeStage})
	} else {
		p.firstStage = StageRasterize
		p.Job.Limits, p.Job.Spool = rasterizeLimits(p.Limits), p.frames
	}
	p.stages = append(p.stages, stage{name: StageRebuild, family: FamilyLight, next: rebuildStage})
}

func init() {
	r := safePDFRenderer()
	r.plan = safePDFPlan
	catalogue[r.Name] = resolve(r)
	outputRules[r.Name] = outputRule{re: regexp.MustCompile(`^output\.pdf$`)}
}
