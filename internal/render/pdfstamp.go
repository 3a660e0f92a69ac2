package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/renderbox/renderbox/internal/wire"
)

// pdf-watermark and pdf-stamp (issue 14): a text laid under a PDF's pages'
// content (a watermark, hidden where the page paints over it) or over it
// (a stamp). ReportLab draws the mark inside the sandbox, a page of it per
// page of the document sized as that page is shown; qpdf lays it under or
// over with --underlay or --overlay, the pages chosen by qpdf's own page
// ranges.

func init() {
	register(
		markRenderer("pdf-watermark", "--underlay", "under", markDefaults{fontSize: 60, opacity: 0.3, rotation: 45, position: "center", color: "#808080"}),
		markRenderer("pdf-stamp", "--overlay", "over", markDefaults{fontSize: 24, opacity: 1, rotation: 0, position: "top-right", color: "#cc0000"}))
}

// pdfMarkScript is the rootfs's script that draws the mark.
const pdfMarkScript = "/usr/local/lib/renderbox/pdf-mark.py"

// markFonts are the mark's fonts: DejaVu (fonts-dejavu-core), which
// covers Latin, Greek and Cyrillic; the script maps the names to files.
var markFonts = []string{"sans", "sans-bold", "serif", "serif-bold", "mono", "mono-bold"}

// markPositions place the mark on the page, margin_mm from its edges.
var markPositions = []string{"center", "top", "bottom", "left", "right", "top-left", "top-right", "bottom-left", "bottom-right"}

// maxMarkLines bounds the lines of a mark's text.
const maxMarkLines = 10

// markText checks a mark's text: something to draw, lines without
// control characters.
func markText(s string) error {
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("the text is blank")
	}
	if n := strings.Count(s, "\n") + 1; n > maxMarkLines {
		return fmt.Errorf("the text has %d lines, at most %d", n, maxMarkLines)
	}
	for _, line := range strings.Split(s, "\n") {
		if r, bad := controlIn(line); bad {
			return fmt.Errorf("the text holds the control character %U (only \\n, between lines, is taken)", r)
		}
	}
	return nil
}

// maxMarkPixels bounds a mark image, read from its header before any
// sandbox starts.
const maxMarkPixels = 25_000_000

// markParts takes the document and its mark as two file parts: a PDF,
// then a PNG or a PDF (of which the first page is the mark; only the
// sandbox parses it).
func markParts(input []byte) ([]string, error) {
	files, err := storedParts(input, "pdf-watermark and pdf-stamp", 2, func(i int, name string, data []byte) error {
		if i == 0 && !bytes.HasPrefix(data, []byte("%PDF-")) {
			return fmt.Errorf("%w: the first file, %q, is the document and must be a PDF (a PDF begins %%PDF-)", ErrUnsupportedInput, name)
		}
		if i == 1 {
			switch Sniff(data) {
			case TypePDF:
				return nil
			case TypePNG:
			default:
				return fmt.Errorf("%w: the second file, %q, is the mark and must be a PNG or a PDF", ErrUnsupportedInput, name)
			}
			if w, h, err := imageSize(data); err != nil || int64(w)*int64(h) > maxMarkPixels {
				return fmt.Errorf("%w: the mark %q is %d×%d pixels (%v); at most %d pixels", ErrInputTooLarge, name, w, h, err, maxMarkPixels)
			}
		}
		return nil
	})
	if err == nil && len(files) != 2 {
		return nil, fmt.Errorf("%w: give the document alone, or the document and a PNG or PDF to lay on it (2 files); got %d", ErrInvalidInput, len(files))
	}
	return files, err
}

type markDefaults struct {
	fontSize, rotation int
	opacity            float64
	position, color    string
}

// maxMarks bounds the marks of one job.
const maxMarks = 10

// markItemOptions are the options each of marks takes: a text mark's.
func markItemOptions(name string, d markDefaults) []Option {
	var out []Option
	for _, o := range markOptions(name, d) {
		if o.Name != "image_width_mm" && o.Name != "marks" {
			out = append(out, o)
		}
	}
	return out
}

// parseMarks reads marks: a JSON list of 1 to maxMarks text marks, each
// validated as the renderer's own options are.
func parseMarks(renderer string, d markDefaults, s string) ([]Values, error) {
	var items []map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&items); err != nil || dec.More() {
		return nil, fmt.Errorf("not a JSON list of marks: %v", err)
	}
	if len(items) == 0 || len(items) > maxMarks {
		return nil, fmt.Errorf("%d marks; give 1 to %d", len(items), maxMarks)
	}
	var out []Values
	for i, item := range items {
		for k, v := range item {
			if n, ok := v.(json.Number); ok {
				f, _ := n.Float64()
				item[k] = f
			}
		}
		v, err := validate(renderer, markItemOptions(renderer, d), item)
		if err == nil && !v.Has("text") {
			err = fmt.Errorf("its text is required")
		}
		if err != nil {
			return nil, fmt.Errorf("mark %d: %v", i+1, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func markOptions(name string, d markDefaults) []Option {
	text := textOpt("text", fmt.Sprintf("Required unless the mark is a PNG or a PDF: the text, UTF-8, lines split by \\n (at most %d), no other control characters. {page}, {pages} and {date} become each page's number, the document's page count and the day the job runs (UTC, YYYY-MM-DD): \"Page {page} of {pages}\".", maxMarkLines), 500)
	text.more = markText
	color := patternOpt("color", "Colour as #rrggbb.", `#[0-9a-fA-F]{6}`)
	color.Default = d.color
	return []Option{
		text,
		enumOpt("font", "DejaVu, which covers Latin, Greek and Cyrillic (other scripts draw as empty boxes).", "sans-bold", markFonts...),
		intOpt("font_size", "Font size in points.", d.fontSize, 4, 300),
		color,
		numOpt("opacity", "Opacity, from 0.05 (faint) to 1 (opaque).", d.opacity, 0.05, 1),
		intOpt("rotation", "Turn the text counterclockwise by this many degrees.", d.rotation, -180, 180),
		enumOpt("position", "Where the text goes on the page, as the page is shown (its rotation taken into account).", d.position, markPositions...),
		numOpt("margin_mm", "Distance from the page's edges for a position other than center, in millimetres.", 15, 0, 200),
		patternOpt("pages", "The pages to mark, e.g. \"1,3-5\"; all when absent. A page past the end fails the job.", pageRangesPattern),
		numOpt("image_width_mm", "With a PNG or a PDF as the mark (a second file part, after the document; of a PDF, its first page as shown): its width on the page in millimetres; its height keeps its proportions.", 60, 1, 1000),
		{Name: "marks", Type: "string", MaxLength: 16 << 10, more: func(s string) error {
			_, err := parseMarks(name, d, s)
			return err
		},
			Description: fmt.Sprintf(`Several text marks in one job instead of text, as JSON: a list of 1 to %d objects, each with text (required) and any of font, font_size, color, opacity, rotation, position, margin_mm and pages, as above; laid in their order, e.g. [{"text": "CONFIDENTIAL", "position": "top"}, {"text": "Page {page} of {pages}", "position": "bottom-right", "font_size": 10}].`, maxMarks)},
	}
}

// markSteps write each mark's options as data for the script (printf's
// argument, not its format), draw each mark, and lay them with qpdf, a
// run a mark in their order: page N of a mark on page N of the
// document, for its pages.
func markSteps(name string, d markDefaults, flag string) func(inputFile, Values) ([]wire.Step, error) {
	return func(in inputFile, v Values) ([]wire.Step, error) {
		doc := in.Path
		image := ""
		switch {
		case v.Has("marks") && (v.Has("text") || v.Has("pages") || len(in.Files) == 2):
			return nil, fmt.Errorf("%w: marks replaces text, pages (each mark has its own) and the image part; give one of them", ErrInvalidOptions)
		case len(in.Files) == 2 && v.Has("text"):
			return nil, fmt.Errorf("%w: the mark is the text or the second file part, not both", ErrInvalidOptions)
		case len(in.Files) == 2:
			doc, image = in.Site+"/"+in.Files[0], in.Site+"/"+in.Files[1]
		case !v.Has("text") && !v.Has("marks"):
			return nil, fmt.Errorf("%w: the text to lay on the pages is required (option \"text\"), or marks, or a PNG or PDF as a second file part", ErrInvalidOptions)
		}
		marks := []Values{v}
		if v.Has("marks") {
			var err error
			if marks, err = parseMarks(name, d, v.String("marks")); err != nil {
				return nil, fmt.Errorf("%w: marks: %v", ErrInvalidOptions, err)
			}
		}
		var steps, lays []wire.Step
		from := doc
		for i, m := range marks {
			o := map[string]any{}
			if image != "" {
				o["image"] = image
			}
			for _, k := range []string{"text", "font", "font_size", "opacity", "rotation", "position", "margin_mm", "color", "image_width_mm"} {
				if m.Has(k) {
					o[k] = m[k]
				}
			}
			// {date} in the text: the day the job runs, UTC.
			o["date"] = time.Now().UTC().Format(time.DateOnly)
			data, err := json.Marshal(o)
			if err != nil {
				return nil, err
			}
			opts, mark := fmt.Sprintf("%s/mark-%d.json", wire.WorkDir, i), fmt.Sprintf("%s/mark-%d.pdf", wire.WorkDir, i)
			steps = append(steps,
				wire.Step{Argv: []string{"/usr/bin/printf", "%s", string(data)}, Stdout: opts},
				wire.Step{Argv: []string{"/usr/bin/python3", "-I", pdfMarkScript, doc, opts, mark}})
			// qpdf takes one overlay (or underlay) a run: a run a mark,
			// each on the last one's output.
			to := fmt.Sprintf("%s/marked-%d.pdf", wire.WorkDir, i)
			if i == len(marks)-1 {
				to = wire.OutputDir + "/output.pdf"
			}
			argv := qpdfArgv(from, flag, mark)
			if p := m.String("pages"); p != "" {
				argv = append(argv, "--to="+p, "--from="+p)
			}
			lays = append(lays, wire.Step{Argv: append(argv, "--", to)})
			from = to
		}
		return append(steps, lays...), nil
	}
}

func markRenderer(name, flag, where string, d markDefaults) *Renderer {
	desc := fmt.Sprintf("Lay a text %s the content of a PDF's pages (all, or those given) with ReportLab and qpdf %s, in the font, size, colour, opacity, rotation and position given.", where, flag)
	if where == "under" {
		desc += " Where a page paints over it (an opaque image, a filled background) the watermark is hidden."
	}
	r := pdfRenderer(name, desc+" The mark may be a PNG, or a PDF's first page, instead: send the document and the mark as two file parts, in that order (font, font_size and color are then unused; opacity, rotation, position and image_width_mm apply). Output: output.pdf.", markOptions(name, d), markSteps(name, d, flag))
	r.Inputs, r.parts, r.partsOf = []string{TypePDF, TypeZIP}, true, markParts
	return r
}
