package render

import "github.com/renderbox/renderbox/internal/wire"

// pdf-archive (issue 14): PDF/A-1b, 2b or 3b with Ghostscript's pdfwrite.

func init() { register(pdfArchive()) }

// pdfaDef is the rootfs's PDF/A prefix: the sRGB output intent (see the
// file). Ghostscript runs with -dSAFER and may read the profiles' folder.
const (
	pdfaDef     = "/usr/share/renderbox/pdfa-def.ps"
	iccProfiles = "/usr/share/color/icc/ghostscript/"
)

// archiveSteps run Ghostscript, then check that what it wrote declares
// the part asked for. Policy 1 drops what PDF/A forbids (JavaScript,
// annotations hidden from print, transparency in part 1, which it
// flattens into an image of the page) rather than fall back to a plain
// PDF; Ghostscript still writes a plain PDF, exiting 0, when it cannot
// make PDF/A at all (a profile it cannot read), and grep, finding no
// pdfaid:part in its XMP (written uncompressed), fails the job then.
// PDFSTOPONERROR makes an error in the document fail the job: without
// it Ghostscript reports "Output may be incorrect" and exits 0, and a
// document that needs a password came out as one blank page of PDF/A
// (measured). AutoRotatePages=/None keeps each page as the document turns
// it (pdfwrite would turn pages by their text's direction).
func archiveSteps(in inputFile, v Values) ([]wire.Step, error) {
	return pdfaSteps(in.Path, wire.OutputDir+"/output.pdf", v.String("conformance")[:1]), nil
}

// pdfaSteps make out, PDF/A-{part}b, from the PDF at src.
func pdfaSteps(src, out, part string) []wire.Step {
	return []wire.Step{
		// qpdf opens the document first, so that one it cannot open (a
		// password, damage past repair) fails saying why, not with
		// Ghostscript's PostScript stack.
		{Argv: qpdfArgv("--show-npages", src), Stdout: wire.WorkDir + "/pages.txt"},
		{Argv: []string{"/usr/bin/gs", "-q", "-dSAFER", "-dBATCH", "-dNOPAUSE", "-dPDFSTOPONERROR", "-sDEVICE=pdfwrite",
			"-dPDFA=" + part, "-dPDFACompatibilityPolicy=1", "-sColorConversionStrategy=RGB",
			"-dAutoRotatePages=/None", "--permit-file-read=" + iccProfiles,
			"-sOutputFile=" + out, pdfaDef, src}},
		{Argv: []string{"/usr/bin/grep", "-q", "-a", "-F", "pdfaid:part='" + part + "'", out}},
	}
}

func pdfArchive() *Renderer {
	return pdfRenderer("pdf-archive",
		"Convert a PDF to PDF/A-1b, 2b or 3b with Ghostscript's pdfwrite: fonts embedded, colours in sRGB with its output intent, XMP metadata declaring the part; what PDF/A forbids (JavaScript, annotations not printed, an owner password's encryption, and for PDF/A-1 transparency, whose pages become images) is dropped; a document that needs a password to open fails. Not validated by a PDF/A validator: see docs/renderers.md. Output: output.pdf.",
		[]Option{
			enumOpt("conformance", "The PDF/A part and level: 1b (PDF 1.4, no transparency), 2b or 3b (PDF 1.7; 3b allows embedded files of any kind).", "2b", "1b", "2b", "3b"),
		}, archiveSteps)
}
