package render

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/renderbox/renderbox/internal/jobspec"
	"github.com/renderbox/renderbox/internal/wire"
	"github.com/renderbox/renderbox/internal/zipdir"
)

// The PDF operations run qpdf from the rootfs, each in a fresh
// sandbox like any renderer: every one of them parses an untrusted PDF.

const qpdf = "/usr/bin/qpdf"

// qpdfArgv is qpdf with args. qpdf exits 3 when it wrote its output after
// warnings, mostly a damaged file it repaired; that output is the result,
// as poppler's page of a damaged file is pdf-png's. Errors still exit 2.
func qpdfArgv(args ...string) []string {
	return append([]string{qpdf, "--warning-exit-0"}, args...)
}

// pdfMetadataScript is the rootfs's script that reads qpdf's JSON.
const pdfMetadataScript = "/usr/local/lib/renderbox/pdf-metadata.py"

// pdfLimits: qpdf is one process that holds the document's objects in
// memory, not its pixels.
var pdfLimits = jobspec.Limits{Timeout: 60 * time.Second, MemoryBytes: 1 << 30, TmpBytes: lightTmp}

// Bounds of pdf-merge's inputs. The total is the renderer's input limit,
// the largest renderer's like the others': above it the API would take
// more from every client before it knows the renderer.
const (
	MaxMergeFiles = 100
	maxMergeBytes = 50 << 20
)

// pdfPasswordPattern is a password for qpdf: printable, one line (it is
// one argument), and not starting with '-' or '@', which qpdf's argument
// parser would take as an option or as a file of arguments.
const pdfPasswordPattern = `[^\x00-\x1f\x7f@-][^\x00-\x1f\x7f]{0,126}`

// mergeParts reads a ZIP's directory and returns its files in order, each
// of which must be a stored PDF. Nothing is decompressed: the API packs
// several file parts as stored entries, and a stored entry's first bytes
// are in the archive as they are, so each is sniffed here, before a
// sandbox starts; the sandbox's unpacker checks the archive again.
func mergeParts(input []byte) ([]string, error) {
	files, err := storedParts(input, "pdf-merge", MaxMergeFiles, func(_ int, name string, data []byte) error {
		if !bytes.HasPrefix(data, []byte("%PDF-")) {
			return fmt.Errorf("%w: file %q is not a PDF (a PDF begins %%PDF-)", ErrUnsupportedInput, name)
		}
		return nil
	})
	if err == nil && len(files) == 0 {
		return nil, fmt.Errorf("%w: the archive holds no file to merge", ErrInvalidInput)
	}
	return files, err
}

// storedParts reads a ZIP's directory and returns its files in order,
// each a stored entry that accept takes, given its place, its name and
// its bytes as they stand in the archive (cut short if the archive is).
func storedParts(input []byte, renderer string, maxFiles int, accept func(i int, name string, data []byte) error) ([]string, error) {
	var files []string
	le := binary.LittleEndian
	err := zipEntries(input, func(e *zipdir.Entry) error {
		name := string(e.Name)
		if strings.HasSuffix(name, "/") {
			return nil // a directory: its files are entries of their own
		}
		switch {
		case !wire.ValidSitePath(name):
			return fmt.Errorf("%w: archive entry %q: a path must be relative, without \"..\" and without \\ \" < > & ' %% ? # or control characters", ErrInvalidInput, name)
		case e.Flags&1 != 0:
			return fmt.Errorf("%w: archive entry %q is encrypted", ErrInvalidInput, name)
		case e.Method != 0:
			return fmt.Errorf("%w: archive entry %q is compressed; %s reads stored entries only (several file parts are packed that way)", ErrInvalidInput, name, renderer)
		case e.UnixMode&0o170000 != 0 && e.UnixMode&0o170000 != 0o100000:
			return fmt.Errorf("%w: archive entry %q is not a file (a link?)", ErrInvalidInput, name)
		}
		if len(files) == maxFiles {
			return fmt.Errorf("%w: %s takes at most %d files", ErrInputTooLarge, renderer, maxFiles)
		}
		// The local header: signature, then the name's and the extra
		// field's lengths at 26 and 28, then the data.
		off := uint64(e.Offset)
		if off > uint64(len(input)) || uint64(len(input))-off < 30 || le.Uint32(input[off:]) != 0x04034b50 {
			return fmt.Errorf("%w: archive entry %q: its local header cannot be read", ErrInvalidInput, name)
		}
		start := off + 30 + uint64(le.Uint16(input[off+26:])) + uint64(le.Uint16(input[off+28:]))
		end := min(start+uint64(e.Size), uint64(len(input)))
		if start > end {
			start = end
		}
		if err := accept(len(files), name, input[start:end]); err != nil {
			return err
		}
		files = append(files, name)
		return nil
	})
	if errors.Is(err, zipdir.ErrNotZip) {
		return nil, fmt.Errorf("%w: the ZIP's directory cannot be read: %v", ErrInvalidInput, err)
	}
	return files, err
}

// mergeSteps concatenates the inputs' pages in order into a new document.
func mergeSteps(in inputFile, v Values) ([]wire.Step, error) {
	inputs := []string{in.Path}
	names := []string{in.Name}
	if len(in.Files) > 0 {
		inputs, names = nil, nil
	}
	for _, f := range in.Files {
		// An absolute path: qpdf never reads it as an option, a page
		// range or a file of arguments.
		inputs, names = append(inputs, in.Site+"/"+f), append(names, f)
	}
	return mergeInto(inputs, names, v)
}

// mergeInto concatenates the PDFs at inputs (absolute paths) in order into
// OutputDir/output.pdf, with a bookmark per input when v asks: titled by
// v's titles, else by names without their extensions.
func mergeInto(inputs, names []string, v Values) ([]wire.Step, error) {
	argv := append(qpdfArgv("--empty", "--pages"), inputs...)
	var titles []string
	if t := v.String("titles"); t != "" {
		titles = strings.Split(t, "\n")
		if len(titles) != len(inputs) {
			return nil, fmt.Errorf("%w: titles has %d lines and the job %d files: one title a file, in their order", ErrInvalidOptions, len(titles), len(inputs))
		}
	} else if v.Bool("bookmarks") {
		for _, n := range names {
			titles = append(titles, strings.TrimSuffix(path.Base(n), path.Ext(n)))
		}
	}
	if titles == nil {
		return []wire.Step{{Argv: append(argv, "--", wire.OutputDir+"/output.pdf")}}, nil
	}
	// The titles go to the script as data, never as code or arguments.
	data, err := json.Marshal(map[string]any{"inputs": inputs, "titles": titles})
	if err != nil {
		return nil, err
	}
	merged, outline := wire.WorkDir+"/merged.pdf", wire.WorkDir+"/outline.json"
	return []wire.Step{
		{Argv: append(argv, "--", merged)},
		{Argv: []string{"/usr/bin/printf", "%s", string(data)}, Stdout: outline},
		{Argv: []string{"/usr/bin/python3", "-I", pdfOutlineScript, "merge", merged, outline, wire.OutputDir + "/output.pdf"}},
	}, nil
}

// titlesOpt: pdf-merge's bookmark titles, each a line of text.
var titlesOpt = func() Option {
	o := textOpt("titles", fmt.Sprintf("The bookmarks' titles instead, one line per file in their order (at most %d bytes a title, no control characters); bookmarks are then made whatever bookmarks says.", maxTitle), 20000)
	o.more = func(s string) error {
		for i, t := range strings.Split(s, "\n") {
			if strings.TrimSpace(t) == "" || len(t) > maxTitle {
				return fmt.Errorf("title %d is blank or over %d bytes", i+1, maxTitle)
			}
			if r, bad := controlIn(t); bad {
				return fmt.Errorf("title %d holds the control character %U", i+1, r)
			}
		}
		return nil
	}
	return o
}()

// maxTitle bounds a bookmark's title.
const maxTitle = 500

// pdfOutlineScript is the rootfs's script that writes pdf-merge's
// bookmarks.
const pdfOutlineScript = "/usr/local/lib/renderbox/pdf-outline.py"

// splitSteps writes the parts: every N pages with qpdf's --split-pages, or
// one qpdf run per range. The sandbox's names sort by their first number;
// the host publishes them as part-1.pdf, part-2.pdf, … in that order.
func splitSteps(in inputFile, v Values) ([]wire.Step, error) {
	ranges := v.String("ranges")
	switch {
	case ranges != "" && v.Has("every"):
		return nil, fmt.Errorf("%w: give either every or ranges, not both", ErrInvalidOptions)
	case ranges == "":
		// %d is qpdf's: the part's first page, or first-last.
		return []wire.Step{{Argv: qpdfArgv(in.Path, "--split-pages="+strconv.Itoa(v.IntOr("every", 1)), wire.OutputDir+"/split-%d.pdf")}}, nil
	}
	var steps []wire.Step
	for i, r := range strings.Split(ranges, ",") {
		steps = append(steps, wire.Step{Argv: qpdfArgv(in.Path, "--pages", ".", r, "--",
			fmt.Sprintf("%s/split-%d.pdf", wire.OutputDir, i+1))})
	}
	return steps, nil
}

// pagesSteps selects and orders pages, then turns some. qpdf applies
// --rotate to the output's pages, after the selection.
func pagesSteps(in inputFile, v Values) ([]wire.Step, error) {
	argv := qpdfArgv(in.Path)
	if p := v.String("pages"); p != "" {
		argv = append(argv, "--pages", ".", p, "--")
	}
	rot := v.Int("rotate")
	switch {
	case rot%90 != 0:
		return nil, fmt.Errorf("%w: rotate is %d; it must be 0, 90, 180 or 270", ErrInvalidOptions, rot)
	case rot == 0 && v.Has("rotate_pages"):
		return nil, fmt.Errorf("%w: rotate_pages needs rotate", ErrInvalidOptions)
	case rot != 0:
		arg := "--rotate=+" + strconv.Itoa(rot)
		if rp := v.String("rotate_pages"); rp != "" {
			arg += ":" + rp
		}
		argv = append(argv, arg)
	}
	return []wire.Step{{Argv: append(argv, wire.OutputDir+"/output.pdf")}}, nil
}

// infoKeys are pdf-metadata's writable options and the document
// information entries they set.
var infoKeys = []struct{ option, key string }{
	{"title", "Title"}, {"author", "Author"}, {"subject", "Subject"}, {"keywords", "Keywords"},
	{"creation_date", "CreationDate"}, {"mod_date", "ModDate"},
}

// dateLayouts are the forms a date option takes: RFC 3339, with or
// without seconds, or a day.
var dateLayouts = []string{time.RFC3339, "2006-01-02T15:04Z07:00", "2006-01-02"}

func parseDate(s string) (time.Time, string, error) {
	for _, l := range dateLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, l, nil
		}
	}
	return time.Time{}, "", fmt.Errorf("%s is not a date as 2026-12-03 or 2026-12-03T13:30:00Z (or +01:00)", quoteShort(s))
}

// dateOpt is a date to write, checked and turned into a PDF date (PDF 1.7,
// 7.9.4) as it is accepted.
func dateOpt(name, desc string) Option {
	o := patternOpt(name, desc+" As 2026-12-03, or 2026-12-03T13:30:00Z with a Z or an offset such as +01:00.",
		`[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}(:[0-9]{2})?(Z|[+-][0-9]{2}:[0-9]{2}))?`)
	o.more = func(s string) error { _, _, err := parseDate(s); return err }
	return o
}

// pdfDate writes an accepted date option as a PDF date: D:YYYYMMDD, or
// D:YYYYMMDDHHmmSS and Z or the offset as +HH'mm'.
func pdfDate(s string) string {
	t, layout, _ := parseDate(s)
	if layout == "2006-01-02" {
		return t.Format("D:20060102")
	}
	if _, off := t.Zone(); off == 0 {
		return t.Format("D:20060102150405Z")
	}
	z := t.Format("-0700")
	return t.Format("D:20060102150405") + z[:3] + "'" + z[3:] + "'"
}

// metadataSteps read the document's information with qpdf --json and the
// rootfs's script; given values to write, the script turns them into an
// update qpdf applies (--update-from-json), the rest of the file kept.
func metadataSteps(in inputFile, v Values) ([]wire.Step, error) {
	qjson := wire.WorkDir + "/qpdf.json"
	steps := []wire.Step{{Argv: qpdfArgv("--json=2", "--json-key=qpdf", "--json-key=pages", "--json-key=encrypt", in.Path), Stdout: qjson}}
	set := map[string]string{}
	for _, k := range infoKeys {
		switch {
		case !v.Has(k.option):
		case strings.HasSuffix(k.option, "_date"):
			set[k.key] = pdfDate(v.String(k.option))
		default:
			set[k.key] = v.String(k.option)
		}
	}
	if len(set) == 0 {
		return append(steps, wire.Step{Argv: []string{"/usr/bin/python3", "-I", pdfMetadataScript, "read", qjson, wire.OutputDir + "/metadata.json"}}), nil
	}
	// One JSON argument: a value is never read as a flag or split.
	values, err := json.Marshal(set)
	if err != nil {
		return nil, err
	}
	update := wire.WorkDir + "/update.json"
	return append(steps,
		wire.Step{Argv: []string{"/usr/bin/python3", "-I", pdfMetadataScript, "update", qjson, update, string(values)}},
		wire.Step{Argv: qpdfArgv(in.Path, "--update-from-json="+update, wire.OutputDir+"/output.pdf")}), nil
}

// protectSteps encrypt with AES-256. qpdf 11.3 takes the passwords as
// positional arguments of --encrypt; the pattern keeps them from being
// read as anything else. They are on argv inside the sandbox only: the
// host hands the request over stdin, and the job's record redacts them.
//
// A user password alone gets a random owner password that is never kept:
// equal to the user password instead, anyone who can open the document
// could lift its restrictions (the owner password grants every
// permission), so allow_*=false would mean nothing.
func protectSteps(in inputFile, v Values) ([]wire.Step, error) {
	owner, user := v.String("owner_password"), v.String("user_password")
	if owner == "" && user == "" {
		return nil, fmt.Errorf("%w: pdf-protect needs user_password (to open the document), owner_password (to lift its restrictions), or both", ErrInvalidOptions)
	}
	if owner == "" {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("making an owner password: %w", err)
		}
		owner = hex.EncodeToString(b)
	}
	argv := qpdfArgv("--encrypt", user, owner, "256")
	if !v.Bool("allow_print") {
		argv = append(argv, "--print=none")
	}
	if !v.Bool("allow_copy") {
		argv = append(argv, "--extract=n")
	}
	// allow_modify is every change; the three below it narrow it: each,
	// when the request leaves it out, follows allow_modify (so that
	// allow_modify false alone still locks everything, as it always did).
	yn := func(b bool) string {
		if b {
			return "y"
		}
		return "n"
	}
	modify := v.Bool("allow_modify")
	argv = append(argv, "--modify-other="+yn(modify))
	for _, p := range []struct{ opt, flag string }{{"allow_annotate", "--annotate="}, {"allow_fill_forms", "--form="}, {"allow_assemble", "--assemble="}} {
		allowed := modify
		if v.Has(p.opt) {
			allowed = v.Bool(p.opt)
		}
		argv = append(argv, p.flag+yn(allowed))
	}
	argv = append(argv, "--", in.Path, wire.OutputDir+"/output.pdf")
	return []wire.Step{{Argv: argv}}, nil
}

func unlockSteps(in inputFile, v Values) []wire.Step {
	argv := qpdfArgv("--decrypt")
	if p := v.String("password"); p != "" {
		argv = append(argv, "--password="+p)
	}
	return []wire.Step{{Argv: append(argv, in.Path, wire.OutputDir+"/output.pdf")}}
}

func passwordOpt(name, desc string) Option {
	return secretOpt(patternOpt(name, desc+" A secret: it is not stored with the job, logged or shown back (the job's options read \""+Redacted+"\"). Printable, 1–127 characters, not starting with '-' or '@'.", pdfPasswordPattern), "1–127 printable characters, not starting with '-' or '@'")
}

// pdfRenderer is a qpdf renderer of one PDF.
func pdfRenderer(name, desc string, opts []Option, steps func(inputFile, Values) ([]wire.Step, error)) *Renderer {
	return &Renderer{
		Name: name, Description: desc, Inputs: []string{TypePDF}, Output: TypePDF, Options: opts,
		MaxInputBytes: 50 << 20, Limits: pdfLimits,
		build: func(in inputFile, v Values, _ jobspec.Limits) (wire.Request, error) {
			st, err := steps(in, v)
			return wire.Request{Env: plainEnv, Steps: st}, err
		},
	}
}

// The PDF operations join the catalogue from here: their builders share
// this file's helpers.
func init() {
	for _, r := range pdfRenderers() {
		catalogue[r.Name] = resolve(r)
	}
}

// pdfRenderers are the PDF operations' catalogue entries.
func pdfRenderers() []*Renderer {
	merge := &Renderer{
		Name:          "pdf-merge",
		Description:   fmt.Sprintf("Merge PDFs into one with qpdf, their pages in the order of the file parts (or of a ZIP's stored entries); each file must be a PDF, at most %d files. With bookmarks or titles, one bookmark per file on its first page (pikepdf). Output: output.pdf.", MaxMergeFiles),
		Inputs:        []string{TypeZIP, TypePDF},
		Output:        TypePDF,
		MaxInputBytes: maxMergeBytes,
		Limits:        pdfLimits,
		parts:         true,
		Options: []Option{
			boolOpt("bookmarks", "One bookmark per file, on its first page, titled by its file name without .pdf.", false),
			titlesOpt,
		},
		build: func(in inputFile, v Values, _ jobspec.Limits) (wire.Request, error) {
			steps, err := mergeSteps(in, v)
			return wire.Request{Env: plainEnv, Steps: steps}, err
		},
	}
	split := pdfRenderer("pdf-split",
		"Split a PDF with qpdf: every N pages, or one part per range. Outputs: part-1.pdf, part-2.pdf, … in page order.",
		[]Option{
			{Name: "every", Type: "integer", Description: "Pages per part (the last may have fewer); 1 when neither every nor ranges is given.", Minimum: num(1), Maximum: num(100000)},
			patternOpt("ranges", "Parts by page ranges, one part per range, e.g. \"1-3,4,5-9\" (a range may run backwards: \"9-5\").", pageRangesPattern),
		}, splitSteps)
	pages := pdfRenderer("pdf-pages",
		"Select, reorder and rotate pages with qpdf. Output: output.pdf.",
		[]Option{
			patternOpt("pages", "Pages in their new order, e.g. \"3,1,2-4\" (a page may repeat; \"9-5\" runs backwards); all when absent.", pageRangesPattern),
			intOpt("rotate", "Turn pages clockwise by 0, 90, 180 or 270 degrees, added to their own rotation.", 0, 0, 270),
			patternOpt("rotate_pages", "The pages to turn, numbered as in the output, e.g. \"1,3-4\"; all when absent.", pageRangesPattern),
		}, pagesSteps)
	metadata := pdfRenderer("pdf-metadata",
		"Read a PDF's document information with qpdf as JSON (title, author, subject, keywords, creator, producer, creation_date and mod_date as the document writes them, pages, encrypted), or, given any of title, author, subject, keywords, creation_date and mod_date, write them. Output: metadata.json when reading, output.pdf when writing.",
		[]Option{
			textOpt("title", "Set the title.", 1000),
			textOpt("author", "Set the author.", 1000),
			textOpt("subject", "Set the subject.", 1000),
			textOpt("keywords", "Set the keywords.", 1000),
			dateOpt("creation_date", "Set the creation date."),
			dateOpt("mod_date", "Set the modification date."),
		}, metadataSteps)
	metadata.Output = TypeJSON
	protect := pdfRenderer("pdf-protect",
		"Encrypt a PDF with qpdf, AES-256: a user password to open it, an owner password that lifts the restrictions (allow_*), or both; at least one. Output: output.pdf.",
		[]Option{
			passwordOpt("owner_password", "The password that lifts the restrictions (allow_*). Absent, a random one is made and never kept: no password lifts them, and the user password opens the document under them (as in any PDF, viewers honour the restrictions; a tool given the user password can still decrypt it, as pdf-unlock does)."),
			passwordOpt("user_password", "The password to open the document. Absent, anyone can open it, under the restrictions; then owner_password is required."),
			boolOpt("allow_print", "Allow printing.", true),
			boolOpt("allow_copy", "Allow copying text and images.", true),
			boolOpt("allow_modify", "Allow changes: the content, and (unless the three below say otherwise) annotations, filling forms and assembling pages.", true),
			{Name: "allow_annotate", Type: "boolean", Description: "Allow adding and changing annotations and filling forms; absent, as allow_modify."},
			{Name: "allow_fill_forms", Type: "boolean", Description: "Allow filling form fields (and signing), even with annotations not allowed; absent, as allow_modify."},
			{Name: "allow_assemble", Type: "boolean", Description: "Allow inserting, rotating and removing pages and making bookmarks and thumbnails; absent, as allow_modify."},
		}, protectSteps)
	unlock := pdfRenderer("pdf-unlock",
		"Remove a PDF's encryption with qpdf, given its password (the user or the owner password; none when it opens without one). A wrong password fails the job (render_failed, \"invalid password\"). Output: output.pdf.",
		[]Option{passwordOpt("password", "The document's password.")},
		func(in inputFile, v Values) ([]wire.Step, error) { return unlockSteps(in, v), nil })
	return []*Renderer{merge, split, pages, metadata, protect, unlock}
}
