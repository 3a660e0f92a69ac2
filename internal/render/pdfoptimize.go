package render

import (
	"strconv"

	"github.com/renderbox/renderbox/internal/wire"
)

// pdf-optimize: a smaller PDF. Ghostscript's pdfwrite rewrites the
// document from what its pages draw (so objects nothing draws are left
// behind, fonts are subset, identical images stored once) and resamples
// and recompresses its images; qpdf then packs the objects into
// compressed object streams. A document that comes out no smaller is
// answered as it came in.

func init() { register(pdfOptimize()) }

// optimizeSteps: qpdf opens the document first (a password or damage
// past repair fails saying why, as in pdf-archive); Ghostscript writes
// work/gs.pdf; qpdf writes output.pdf with object streams and every
// stream compressed at zlib's best; the last step puts the input back
// when that is no smaller.
//
// Images above image_dpi (at the size a page draws them) are resampled
// to it, bicubic; colour and grey images are stored as JPEG at
// image_quality (PassThroughJPEGImages off: a JPEG is re-encoded too, or
// a camera's 98% JPEG would pass through untouched); one-bit images keep
// their lossless compression at up to twice image_dpi. Fonts are
// embedded and subset; pages keep their own rotation (AutoRotatePages
// /None, as in pdf-archive) and PDFSTOPONERROR fails a document Ghostscript
// cannot read rather than answer a blank page.
func optimizeSteps(in inputFile, v Values) ([]wire.Step, error) {
	dpi := v.Int("image_dpi")
	res := strconv.Itoa(dpi)
	mono := strconv.Itoa(min(2*dpi, 1200))
	gsOut := wire.WorkDir + "/gs.pdf"
	out := wire.OutputDir + "/output.pdf"
	return []wire.Step{
		{Argv: qpdfArgv("--show-npages", in.Path), Stdout: wire.WorkDir + "/pages.txt"},
		{Argv: []string{"/usr/bin/gs", "-q", "-dSAFER", "-dBATCH", "-dNOPAUSE", "-dPDFSTOPONERROR", "-sDEVICE=pdfwrite",
			"-dCompatibilityLevel=1.7", "-dAutoRotatePages=/None",
			"-dEmbedAllFonts=true", "-dSubsetFonts=true", "-dCompressFonts=true", "-dDetectDuplicateImages=true",
			"-dPassThroughJPEGImages=false", "-dPassThroughJPXImages=false",
			"-dDownsampleColorImages=true", "-dColorImageDownsampleType=/Bicubic", "-dColorImageResolution=" + res,
			"-dColorImageDownsampleThreshold=1.0", "-dAutoFilterColorImages=false", "-dColorImageFilter=/DCTEncode",
			"-dDownsampleGrayImages=true", "-dGrayImageDownsampleType=/Bicubic", "-dGrayImageResolution=" + res,
			"-dGrayImageDownsampleThreshold=1.0", "-dAutoFilterGrayImages=false", "-dGrayImageFilter=/DCTEncode",
			"-dDownsampleMonoImages=true", "-dMonoImageDownsampleType=/Subsample", "-dMonoImageResolution=" + mono,
			"-dJPEGQ=" + strconv.Itoa(v.Int("image_quality")),
			"-sOutputFile=" + gsOut, in.Path}},
		{Argv: qpdfArgv("--object-streams=generate", "--compress-streams=y", "--recompress-flate", "--compression-level=9",
			gsOut, out)},
		{Argv: []string{"/bin/sh", "-c", `[ "$(stat -c %s "$2")" -lt "$(stat -c %s "$1")" ] || cp "$1" "$2"`, "keep-smaller", in.Path, out}},
	}, nil
}

func pdfOptimize() *Renderer {
	r := pdfRenderer("pdf-optimize",
		"Make a PDF smaller with Ghostscript's pdfwrite and qpdf: images drawn above image_dpi resampled to it and stored as JPEG at image_quality (one-bit images lossless, at up to twice image_dpi), fonts embedded and subset, identical images stored once, objects no page draws dropped, objects packed into compressed object streams. Pages and text stay; a document that comes out no smaller is answered as it came; the job's diagnostics.size says by how much it shrank. Links and bookmarks are kept as Ghostscript can; form fields are not guaranteed to stay fillable, and a PDF/A's conformance is not kept (run pdf-archive after it). Output: output.pdf.",
		[]Option{
			intOpt("image_dpi", "The most pixels per inch an image keeps, at the size its page draws it; images above are resampled (bicubic) to it. 150 suits the screen and office printing, 300 print.", 150, 36, 1200),
			intOpt("image_quality", "JPEG quality of the colour and grey images, 1 (smallest) to 100 (best).", 75, 1, 100),
		}, optimizeSteps)
	r.ReportsSize = true
	return r
}
