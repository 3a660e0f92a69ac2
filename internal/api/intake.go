package api

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/renderbox/renderbox/internal/bytesize"
	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/wire"
)

// Intake reads POST /v1/jobs within bounds chosen while reading, so that a
// body never costs more than its renderer's input limit (docs/security.md,
// "Request intake bounds").
//
//   - The input is decoded as it arrives (multipart part, or base64 inside
//     the JSON string) into one buffer capped at the renderer's input
//     limit; until the renderer is known, at the largest renderer's. Name
//     the renderer before the input (the `renderer` field before `file`,
//     or `"renderer"` before `"input_base64"`) to be refused at its limit
//     rather than at the largest.
//   - The body is capped at the renderer's input limit plus its encoding
//     and the other fields (bodyLimit), and at -max-body-bytes.
//   - renderer, options, limits, callback_url, output_name and deliver are at most
//     maxFieldBytes each; every field at most once; an unknown one ends
//     the parse. output_name is checked as it is set.

// maxFieldBytes bounds each field but the input, as text.
const maxFieldBytes = 8 << 10

// bodySlack is what a body may hold beyond its input and fields: part
// headers and boundaries, key names, whitespace.
const bodySlack = 64 << 10

var (
	errBodyTooLarge  = errors.New("request body too large")
	errFieldTooLarge = errors.New("field too large")
)

// intake is one submission being read.
type intake struct {
	lookup   func(string) (*render.Renderer, error)
	json     bool
	maxBody  int64
	body     *boundedBody
	input    inputBuffer
	seen     map[string]bool
	renderer *render.Renderer
	sub      submission
	// With several file parts: the first one's name, then the ZIP they
	// are packed into and the names in it.
	firstName string
	zw        *zip.Writer
	names     map[string]bool
}

// newIntake prepares to read body with the bounds of the largest renderer
// lookup knows.
func newIntake(r *http.Request, json bool, maxBody int64, lookup func(string) (*render.Renderer, error)) *intake {
	largest := int64(0)
	for _, name := range render.Names() {
		if r, err := lookup(name); err == nil {
			largest = max(largest, r.MaxInputBytes)
		}
	}
	hint := r.ContentLength
	if json {
		hint = hint / 4 * 3
	}
	return &intake{
		lookup: lookup, json: json, maxBody: maxBody,
		body:  &boundedBody{r: r.Body, limit: min(maxBody, bodyLimit(largest, json))},
		input: inputBuffer{max: largest, who: "any renderer", hint: hint},
		seen:  map[string]bool{},
	}
}

// setRenderer names the renderer: from here on the input and the body are
// held to its limits.
func (in *intake) setRenderer(name string) error {
	if strings.Contains(name, render.ChainSeparator) {
		return fmt.Errorf("%w %s: a chain names its first renderer in renderer and the others in then", render.ErrUnknownRenderer, quoteBounded(name))
	}
	r, err := in.lookup(name)
	if err != nil {
		return err
	}
	in.renderer, in.sub.Renderer = r, r.Name
	if err := in.input.tighten(r.MaxInputBytes, r.Name); err != nil {
		return err
	}
	return in.body.tighten(min(in.maxBody, bodyLimit(r.MaxInputBytes, in.json)))
}

// field records that a field was given, refusing unknown and repeated ones.
func (in *intake) field(name string, known ...string) error {
	ok := false
	for _, k := range known {
		ok = ok || k == name
	}
	if !ok {
		return fmt.Errorf("%w: unknown field %s (%v)", errBadRequest, quoteBounded(name), known)
	}
	if in.seen[name] {
		return fmt.Errorf("%w: field %s appears twice", errBadRequest, name)
	}
	in.seen[name] = true
	return nil
}

func quoteBounded(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "…"
	}
	return strconv.Quote(s)
}

// readErr keeps the refusals that have their own answer and makes the
// rest a bad request.
func readErr(what string, err error) error {
	if errors.Is(err, errBodyTooLarge) || errors.Is(err, errFieldTooLarge) || errors.Is(err, render.ErrInputTooLarge) {
		return err
	}
	return fmt.Errorf("%w: %s: %v", errBadRequest, what, err)
}

func fieldTooLarge(name string) error {
	return fmt.Errorf("%w: the %s field is over %s", errFieldTooLarge, name, bytesize.String(maxFieldBytes))
}

// readSubmission reads a multipart or JSON submission. Errors wrap
// errUnsupportedMediaType, errBadRequest, errBodyTooLarge, errFieldTooLarge or a render error
// (unknown renderer, input too large).
func readSubmission(r *http.Request, maxBody int64, lookup func(string) (*render.Renderer, error)) (*submission, *render.Renderer, error) {
	ct, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: Content-Type must be multipart/form-data or application/json", errUnsupportedMediaType)
	}
	switch {
	case ct != "application/json" && ct != "multipart/form-data":
		return nil, nil, fmt.Errorf("%w: Content-Type %s is not multipart/form-data or application/json", errUnsupportedMediaType, quoteBounded(ct))
	case ct == "multipart/form-data" && params["boundary"] == "":
		return nil, nil, fmt.Errorf("%w: multipart body without a boundary", errBadRequest)
	}
	in := newIntake(r, ct == "application/json", maxBody, lookup)
	// Refused before the first read, so before net/http's 100 Continue:
	// a client that waits for it never sends the body and reads the 413
	// whole. The renderer is inside the body, so the bound is the route's.
	if r.ContentLength > in.body.limit {
		return nil, nil, fmt.Errorf("%w: the request body is declared as %s (Content-Length), over the %s a submission may be; each renderer's max_input_bytes is in GET /v1/renderers",
			errBodyTooLarge, bytesize.String(r.ContentLength), bytesize.String(in.body.limit))
	}
	if in.json {
		err = in.readJSON()
	} else {
		err = in.readMultipart(params["boundary"])
	}
	if err != nil {
		return nil, nil, err
	}
	if in.renderer == nil {
		if err := in.setRenderer(""); err != nil {
			return nil, nil, err
		}
	}
	if in.sub.Then != nil {
		if err := in.chain(); err != nil {
			return nil, nil, err
		}
	}
	in.sub.Input = in.input.b
	if in.seen["url"] {
		// The page's address is the job's input, of its own type: the
		// worker's broker fetches the page (render.TypeURL).
		in.sub.Input, in.sub.InputType = []byte(in.sub.URL), render.TypeURL
	}
	return &in.sub, in.renderer, nil
}

var multipartFields = []string{"renderer", "file", "download_from", "url", "input_type", "options", "limits", "callback_url", "output_name", "then", "deliver"}

func (in *intake) readMultipart(boundary string) error {
	mr := multipart.NewReader(in.body, boundary)
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return readErr("reading the multipart body", err)
		}
		name := part.FormName()
		if name == "file" {
			in.sub.Files++
		}
		if name == "file" && in.seen["file"] {
			// Several files: the page and what it loads.
			if err := in.addFile(part); err != nil {
				return err
			}
			continue
		}
		if err := in.field(name, multipartFields...); err != nil {
			return err
		}
		if name == "file" {
			in.sub.PartType = partType(part.Header.Get("Content-Type"))
			in.firstName = partFileName(part)
			if _, err := copyPooled(&in.input, part); err != nil {
				return readErr("reading the file part", err)
			}
			continue
		}
		text, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
		if err != nil {
			return readErr("reading part "+name, err)
		}
		if len(text) > maxFieldBytes {
			return fieldTooLarge(name)
		}
		if err := in.set(name, text); err != nil {
			return err
		}
	}
	if err := in.oneInput("file part", "file"); err != nil {
		return err
	}
	if in.zw != nil {
		if err := in.zw.Close(); err != nil {
			return readErr("packing the file parts", err)
		}
	}
	return nil
}

// addFile adds a second or later file part. The parts are packed, as they
// arrive, into a ZIP of stored entries named by their file names — the
// input a renderer takes several files as; the first part, read as a lone
// input until now, becomes its first entry.
func (in *intake) addFile(part *multipart.Part) error {
	if in.zw == nil {
		if err := checkPartName(in.firstName, nil); err != nil {
			return err
		}
		first := in.input.b
		in.input.b, in.input.hint = nil, 2*int64(len(first))
		in.names = map[string]bool{in.firstName: true}
		in.zw = zip.NewWriter(&in.input)
		w, err := in.zw.CreateHeader(&zip.FileHeader{Name: in.firstName, Method: zip.Store})
		if err == nil {
			_, err = w.Write(first)
		}
		if err != nil {
			return readErr("packing the file parts", err)
		}
		in.sub.PartType = "" // the input is the ZIP
	}
	name := partFileName(part)
	if err := checkPartName(name, in.names); err != nil {
		return err
	}
	in.names[name] = true
	w, err := in.zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
	if err == nil {
		_, err = copyPooled(w, part)
	}
	if err != nil {
		return readErr("reading file part "+quoteBounded(name), err)
	}
	return nil
}

// partFileName is a part's filename parameter as sent, directories
// included (Part.FileName keeps only the base name).
func partFileName(part *multipart.Part) string {
	_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}

// checkPartName refuses a file part's name that cannot be a path among
// the job's files, or one seen before.
func checkPartName(name string, seen map[string]bool) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: with several file parts, each needs a filename (its path among the files, e.g. css/style.css)", errBadRequest)
	case !wire.ValidSitePath(name):
		return fmt.Errorf("%w: file part name %s: a path must be relative, without \"..\" and without \\ \" < > & ' %% ? # or control characters", errBadRequest, quoteBounded(name))
	case seen[name]:
		return fmt.Errorf("%w: two file parts are named %s", errBadRequest, quoteBounded(name))
	}
	return nil
}

// set stores a small field's value.
func (in *intake) set(name string, v []byte) error {
	switch name {
	case "renderer":
		return in.setRenderer(string(v))
	case "options":
		in.sub.Options = v
	case "limits":
		in.sub.Limits = v
	case "then":
		in.sub.Then = v
	case "download_from":
		in.sub.DownloadFrom = v
	case "url":
		in.sub.URL = string(v)
	case "callback_url":
		in.sub.CallbackURL = string(v)
	case "deliver":
		in.sub.Deliver = v
	case "input_type":
		in.sub.InputType = string(v)
	case "output_name":
		if err := render.CheckOutputName(string(v)); err != nil {
			return fmt.Errorf("%w: %v", errBadRequest, err)
		}
		in.sub.OutputName = string(v)
	}
	return nil
}

// partType is a file part's Content-Type when it declares a text type the
// catalogue takes from a client (render.DeclarableTypes), but text/plain,
// which clients send for any text; "" otherwise. Unlike input_type, a
// part's type that the bytes do not fit is ignored, not refused: clients
// set it from file names.
func partType(ct string) string {
	t, err := render.ParseDeclared(ct)
	if err != nil || t == render.TypeText || !slices.Contains(render.DeclarableTypes(), t) {
		return ""
	}
	return t
}

var jsonFields = []string{"renderer", "input_base64", "download_from", "url", "input_type", "options", "limits", "callback_url", "output_name", "then", "deliver"}

// readJSON reads {"renderer": …, "input_base64": …, …} as a stream: the
// base64 string is decoded as it is read, never held as text.
// encoding/json cannot do that — its Decoder buffers a whole string token.
func (in *intake) readJSON() error {
	br := scanReaders.Get().(*bufio.Reader)
	br.Reset(in.body)
	defer func() { br.Reset(nil); scanReaders.Put(br) }()
	s := &jsonScanner{r: br}
	if err := s.expect('{', "the JSON body must be an object"); err != nil {
		return err
	}
	c, err := s.next()
	if err != nil {
		return readErr("reading the JSON body", err)
	}
	for c != '}' {
		if c != '"' {
			return fmt.Errorf("%w: the JSON body: want a field name, got %q", errBadRequest, c)
		}
		key, err := s.readString(64)
		if errors.Is(err, errFieldTooLarge) {
			return fmt.Errorf("%w: unknown field (a name over 64 bytes)", errBadRequest)
		}
		if err != nil {
			return readErr("reading the JSON body", err)
		}
		if err := in.field(string(key), jsonFields...); err != nil {
			return err
		}
		if err := s.expect(':', "the JSON body: want ':' after a field name"); err != nil {
			return err
		}
		if err := in.readJSONValue(s, string(key)); err != nil {
			return err
		}
		if c, err = s.next(); err != nil {
			return readErr("reading the JSON body", err)
		}
		if c == ',' {
			if c, err = s.next(); err != nil {
				return readErr("reading the JSON body", err)
			}
			if c == '}' {
				return fmt.Errorf("%w: the JSON body: a comma before '}'", errBadRequest)
			}
			continue
		}
		if c != '}' {
			return fmt.Errorf("%w: the JSON body: want ',' or '}' after a value, got %q", errBadRequest, c)
		}
	}
	if c, err := s.next(); !errors.Is(err, io.EOF) {
		if err != nil {
			return readErr("reading the JSON body", err)
		}
		return fmt.Errorf("%w: data after the JSON object (%q)", errBadRequest, c)
	}
	return in.oneInput("input_base64", "input_base64")
}

// oneInput checks that the submission gives its input one way: the
// uploaded field (what, named field), download_from or url.
func (in *intake) oneInput(what, field string) error {
	n := 0
	for _, f := range []string{field, "download_from", "url"} {
		if in.seen[f] {
			n++
		}
	}
	switch {
	case n > 1:
		return fmt.Errorf("%w: give the input one way: as a %s, as download_from or as url", errBadRequest, what)
	case n == 0:
		return fmt.Errorf("%w: the body has no %s (or download_from, or url)", errBadRequest, what)
	case in.seen["url"] && in.seen["input_type"]:
		return fmt.Errorf("%w: url is a page's address; input_type does not apply to it", errBadRequest)
	}
	return nil
}

func (in *intake) readJSONValue(s *jsonScanner, key string) error {
	switch key {
	case "input_base64":
		if c, err := s.next(); err != nil || c != '"' {
			return fmt.Errorf("%w: input_base64 must be a string", errBadRequest)
		}
		_, err := copyPooled(&in.input, base64.NewDecoder(base64.StdEncoding, &jsonString{r: s.r}))
		var corrupt base64.CorruptInputError
		if errors.As(err, &corrupt) {
			return fmt.Errorf("%w: input_base64 is not valid base64: %v", errBadRequest, err)
		}
		if err != nil {
			return readErr("reading input_base64", err)
		}
		return nil
	case "renderer", "callback_url", "input_type", "output_name", "url":
		if c, err := s.next(); err != nil || c != '"' {
			return fmt.Errorf("%w: %s must be a string", errBadRequest, key)
		}
		v, err := s.readString(maxFieldBytes)
		if errors.Is(err, errFieldTooLarge) {
			return fieldTooLarge(key)
		}
		if err != nil {
			return readErr("reading "+key, err)
		}
		if !utf8.Valid(v) {
			return fmt.Errorf("%w: %s is not valid UTF-8", errBadRequest, key)
		}
		return in.set(key, v)
	default: // options, limits, then, deliver: kept as JSON text
		v, err := s.readRaw(maxFieldBytes)
		if errors.Is(err, errFieldTooLarge) {
			return fieldTooLarge(key)
		}
		if err != nil {
			return readErr("reading "+key, err)
		}
		return in.set(key, v)
	}
}

// chainStep is one element of a submission's then: a renderer after the
// one before, with its options.
type chainStep struct {
	Renderer string         `json:"renderer"`
	Options  map[string]any `json:"options"`
}

// chain makes the submission a chain: its renderer the first step and
// then's the others, as the catalogue runs it (render.Lookup of the names
// joined by render.ChainSeparator, each step's options as
// "<renderer>.<option>"). The chain takes its input as its first step
// does, whose limits the input was held to already.
func (in *intake) chain() error {
	var steps []chainStep
	dec := json.NewDecoder(bytes.NewReader(in.sub.Then))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&steps); err != nil {
		return fmt.Errorf("%w: then: want a list of {\"renderer\": …, \"options\": {…}}: %v", errBadRequest, err)
	}
	if len(steps) == 0 {
		return fmt.Errorf("%w: then is empty; leave it out for one renderer", errBadRequest)
	}
	first := map[string]any{}
	if len(in.sub.Options) > 0 {
		if err := json.Unmarshal(in.sub.Options, &first); err != nil {
			return fmt.Errorf("%w: options must be a JSON object: %v", render.ErrInvalidOptions, err)
		}
	}
	names := []string{in.sub.Renderer}
	opts := map[string]any{}
	add := func(step string, o map[string]any) {
		for k, v := range o {
			opts[step+"."+k] = v
		}
	}
	add(in.sub.Renderer, first)
	for _, st := range steps {
		if st.Renderer == "" || strings.Contains(st.Renderer, render.ChainSeparator) {
			return fmt.Errorf("%w %s in then: each step names one renderer", render.ErrUnknownRenderer, quoteBounded(st.Renderer))
		}
		names = append(names, st.Renderer)
		add(st.Renderer, st.Options)
	}
	name := strings.Join(names, render.ChainSeparator)
	r, err := in.lookup(name)
	if err != nil {
		return err
	}
	b, err := json.Marshal(opts)
	if err != nil {
		return fmt.Errorf("%w: %v", render.ErrInvalidOptions, err)
	}
	in.renderer, in.sub.Renderer, in.sub.Options = r, name, b
	return nil
}

// An intake's two 32 KiB buffers, the JSON body's reader and the copy of
// its input, were two thirds of what each POST /v1/jobs allocated (64 KiB
// of a small job's 94). They are reused, and neither hands a later
// request a byte of an earlier one: readString and readRaw copy what they
// return, a reader is Reset to nothing before it is put back, and a
// buffer is only written before it is read
// (TestConcurrentIntakesKeepTheirOwnInput).
var (
	scanReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}
	copyBufs    = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
)

// copyPooled is io.Copy through a reused buffer.
func copyPooled(dst io.Writer, src io.Reader) (int64, error) {
	b := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(b)
	return io.CopyBuffer(dst, src, *b)
}
