package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"slices"
	"strings"
	"unicode/utf8"
)

// ErrProtocol means the peer broke the protocol: wrong frame order, bad JSON,
// sizes that do not add up. From a sandbox it is a sign of compromise or a
// crash and is never trusted further.
var ErrProtocol = errors.New("protocol violation")

// ErrOutputLimit means the peer sent more output than the caps allow.
var ErrOutputLimit = errors.New("output over the limit")

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// ValidName reports whether name is a plain file name safe to use under a
// fixed directory: no separators, not "." or "..", printable, short.
func ValidName(name string) bool {
	if name == "" || len(name) > 128 || name == "." || name == ".." || path.Base(name) != name {
		return false
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || r == '/' || r == '\\' {
			return false
		}
	}
	return true
}

// MaxSitePath bounds a site path's length in bytes.
const MaxSitePath = 255

// ValidSitePath reports whether name may be a file's path in a job's site
// (an unpacked archive): relative, clean, "/"-separated, at most 16 levels
// deep, no component that is empty, "." or "..", and none of the
// characters that would need escaping in HTML or a URL path (control
// characters, \ " < > & ' % ? # and back-quote). Other UTF-8 is fine.
func ValidSitePath(name string) bool {
	if name == "" || len(name) > MaxSitePath || !utf8.ValidString(name) || strings.Count(name, "/") > 15 {
		return false
	}
	for _, c := range strings.Split(name, "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || strings.ContainsRune("\\\"<>&'%?#`", r) {
			return false
		}
	}
	return true
}

// Diagnostic is s as an entry of a diagnostic list: whole if it fits in
// MaxDiagnosticBytes, else cut on a rune boundary and marked "…" within
// them. A Diagnostic is its own Diagnostic.
func Diagnostic(s string) string {
	const mark = "…"
	if len(s) <= MaxDiagnosticBytes {
		return s
	}
	n := MaxDiagnosticBytes - len(mark)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + mark
}

// Diagnostics is list as a Result carries it: its first MaxDiagnostics
// entries, each a Diagnostic. It reuses list's array.
func Diagnostics(list []string) []string {
	list = list[:min(len(list), MaxDiagnostics)]
	for i, s := range list {
		list[i] = Diagnostic(s)
	}
	return list
}

// underTmp reports whether p is a clean absolute path below /tmp.
func underTmp(p string) bool {
	return path.IsAbs(p) && path.Clean(p) == p && len(p) > len("/tmp/") && p[:len("/tmp/")] == "/tmp/"
}

// ReadRequest reads a request and copies its input to dst, reading at most
// maxInput bytes of input whatever the header claims.
func ReadRequest(r io.Reader, dst io.Writer, maxInput int64) (*Request, error) {
	fr := NewReader(r)
	typ, p, err := fr.Next()
	if err != nil {
		return nil, fmt.Errorf("reading request header: %w", err)
	}
	if typ != TypeRequest {
		return nil, protoErr("first frame is %q, want %q", typ, TypeRequest)
	}
	var req Request
	if err := json.Unmarshal(p, &req); err != nil {
		return nil, protoErr("request header: %v", err)
	}
	switch req.Mode {
	case ModeRender:
		if len(req.Argv) > 0 {
			if len(req.Steps) > 0 {
				return nil, protoErr("render request has both argv and steps")
			}
			req.Steps = []Step{{Argv: req.Argv}}
			req.Argv = nil
		}
		if len(req.After) > 0 && req.Browser == nil && req.Office == nil {
			return nil, protoErr("render request has steps after nothing")
		}
		if len(req.Steps) == 0 && req.Browser == nil && req.Office == nil {
			return nil, protoErr("render request has nothing to run")
		}
		for _, st := range slices.Concat(req.Steps, req.After) {
			if len(st.Argv) == 0 || !path.IsAbs(st.Argv[0]) {
				return nil, protoErr("every step needs an absolute argv[0]")
			}
			if st.Stdout != "" && !underTmp(st.Stdout) {
				return nil, protoErr("step stdout %q is not a file under /tmp", st.Stdout)
			}
		}
		if b := req.Browser; b != nil {
			if len(b.Argv) == 0 || !path.IsAbs(b.Argv[0]) || !underTmp(b.Page) || !ValidName(b.Output) ||
				(b.PDF == nil) == (b.Screenshot == nil) {
				return nil, protoErr("browser request needs an absolute argv[0], a page under /tmp, an output name and exactly one of pdf or screenshot")
			}
			if b.URL != "" && !FetchableURL(b.URL) {
				return nil, protoErr("browser request's url is not one")
			}
			if (b.Site != "" && !underTmp(b.Site)) || (b.PagePath != "" && !ValidSitePath(b.PagePath)) {
				return nil, protoErr("browser request's site must be under /tmp and its page path a site path")
			}
		}
		if o := req.Office; o != nil {
			if req.Browser != nil {
				return nil, protoErr("render request has both browser and office")
			}
			ok := path.Clean(o.Input) == o.Input && path.Dir(o.Input) == InputDir && ValidName(path.Base(o.Input))
			if len(o.Parts) > 0 {
				ok = o.Input == ""
				for _, p := range o.Parts {
					ok = ok && underTmp(p.Path)
				}
			}
			if !ok || !underTmp(o.OutDir) || o.Format != OfficePDF {
				return nil, protoErr("office request needs an input file in %s or parts under /tmp, an output directory under /tmp and the format %q", InputDir, OfficePDF)
			}
		}
		if u := req.Unpack; u != nil && (path.Dir(u.Archive) != InputDir || !underTmp(u.Dir) || u.MaxFiles <= 0 || u.MaxBytes <= 0) {
			return nil, protoErr("unpack needs an archive in %s, a directory under /tmp and positive bounds", InputDir)
		}
		if !ValidName(req.InputName) {
			return nil, protoErr("input name %q is not a plain file name", req.InputName)
		}
	case ModeProbe:
	default:
		return nil, protoErr("unknown mode %q", req.Mode)
	}
	if req.InputSize < 0 || req.InputSize > maxInput {
		return nil, protoErr("input size %d outside [0, %d]", req.InputSize, maxInput)
	}
	if req.MaxOutputBytes < 0 || req.MaxOutputFiles < 0 || req.StderrTail < 0 {
		return nil, protoErr("negative limit")
	}
	var got int64
	for got < req.InputSize {
		typ, p, err := fr.Next()
		if err != nil {
			return nil, fmt.Errorf("reading input after %d of %d bytes: %w", got, req.InputSize, err)
		}
		if typ != TypeInput {
			return nil, protoErr("frame %q inside the input", typ)
		}
		if got+int64(len(p)) > req.InputSize {
			return nil, protoErr("input longer than the announced %d bytes", req.InputSize)
		}
		if _, err := dst.Write(p); err != nil {
			return nil, fmt.Errorf("writing input: %w", err)
		}
		got += int64(len(p))
	}
	return &req, nil
}

// WriteRequest sends req followed by exactly req.InputSize bytes from input.
func WriteRequest(w io.Writer, req *Request, input io.Reader) error {
	if err := WriteJSON(w, TypeRequest, req); err != nil {
		return err
	}
	n, err := WriteChunks(w, TypeInput, io.LimitReader(input, req.InputSize))
	if err != nil {
		return fmt.Errorf("sending input: %w", err)
	}
	if n != req.InputSize {
		return fmt.Errorf("sending input: got %d bytes from the source, announced %d", n, req.InputSize)
	}
	return nil
}

// Limits bound what ReadResponse accepts.
type Limits struct {
	MaxBytes int64 // total output bytes across files
	MaxFiles int
	// Broker, when set, answers the agent's fetches (TypeFetch frames),
	// writing the answers to Answers (the agent's stdin); without it a
	// fetch is a protocol violation.
	Broker  Broker
	Answers io.Writer
}

// File is an output file received from the sandbox. Data is nil for a file
// whose bytes went to a Spool.
type File struct {
	Name string
	Data []byte
}

// Response is a decoded response.
type Response struct {
	Result Result
	Files  []File
}

// A Spool takes a response's files as they arrive instead of the Response
// holding their bytes: safe-pdf's frames are up to 200 MiB, which the
// worker's heap would otherwise hold for the length of a job.
type Spool interface {
	// Start is called as a response begins: whatever an earlier response
	// sent (a stage run again cold) is void.
	Start()
	// File returns where the bytes of the file go: exactly size bytes,
	// or the response fails. ReadResponse has checked the name and size
	// against the limits; a Write error fails the response.
	File(name string, size int64) io.Writer
}

// ReadResponse reads output files and the final result. It stops with an
// error wrapping ErrOutputLimit as soon as the announced or received bytes
// pass the limits, so the caller can kill the sandbox before reading more.
// Every file's size and digest are checked against the result's list.
func ReadResponse(r io.Reader, lim Limits) (*Response, error) {
	return ReadResponseTo(r, lim, nil)
}

// ReadResponseTo is ReadResponse writing the files' bytes to spool, when
// it is not nil, instead of holding them.
func ReadResponseTo(r io.Reader, lim Limits, spool Spool) (*Response, error) {
	fr := NewReader(r)
	resp := &Response{}
	if spool != nil {
		spool.Start()
	}
	var total int64
	// The file being received: its bytes so far, where they go and
	// their digest, checked against the manifest at the end.
	var cur *File
	var curGot, curWant int64
	var curOut io.Writer
	var curSum hash.Hash
	var got []FileInfo
	ended := func() error {
		if cur == nil {
			return nil
		}
		if curGot != curWant {
			return protoErr("file %q ended after %d of %d bytes", cur.Name, curGot, curWant)
		}
		got = append(got, FileInfo{Name: cur.Name, Size: curGot, SHA256: hex.EncodeToString(curSum.Sum(nil))})
		return nil
	}
	seen := map[string]bool{}
	var fetches *fetchServer
	if lim.Broker != nil {
		fetches = &fetchServer{b: lim.Broker, w: lim.Answers}
	}
	for {
		typ, p, err := fr.Next()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("reading response: %w", err)
		}
		switch typ {
		case TypeFile:
			if err := ended(); err != nil {
				return nil, err
			}
			var h FileHeader
			if err := json.Unmarshal(p, &h); err != nil {
				return nil, protoErr("file header: %v", err)
			}
			if !ValidName(h.Name) || seen[h.Name] {
				return nil, protoErr("bad or repeated file name %q", h.Name)
			}
			if h.Size < 0 {
				return nil, protoErr("file %q has negative size", h.Name)
			}
			if len(resp.Files)+1 > lim.MaxFiles {
				return nil, fmt.Errorf("%w: more than %d files", ErrOutputLimit, lim.MaxFiles)
			}
			if total+h.Size > lim.MaxBytes {
				return nil, fmt.Errorf("%w: more than %d bytes", ErrOutputLimit, lim.MaxBytes)
			}
			seen[h.Name] = true
			f := File{Name: h.Name}
			if spool == nil {
				f.Data = make([]byte, 0, h.Size)
			}
			resp.Files = append(resp.Files, f)
			cur, curGot, curWant, curSum = &resp.Files[len(resp.Files)-1], 0, h.Size, sha256.New()
			if spool != nil {
				curOut = spool.File(h.Name, h.Size)
			}
			total += h.Size
		case TypeData:
			if cur == nil {
				return nil, protoErr("data before any file header")
			}
			if curGot+int64(len(p)) > curWant {
				return nil, protoErr("file %q longer than its announced %d bytes", cur.Name, curWant)
			}
			curGot += int64(len(p))
			curSum.Write(p)
			if curOut == nil {
				cur.Data = append(cur.Data, p...)
			} else if _, err := curOut.Write(p); err != nil {
				return nil, fmt.Errorf("spooling file %q: %w", cur.Name, err)
			}
		case TypeResult:
			if err := ended(); err != nil {
				return nil, err
			}
			if err := json.Unmarshal(p, &resp.Result); err != nil {
				return nil, protoErr("result: %v", err)
			}
			if err := checkManifest(resp, got); err != nil {
				return nil, err
			}
			return resp, nil
		case TypeFetch:
			if fetches == nil {
				return nil, protoErr("a fetch, and this job has no broker")
			}
			if err := fetches.serve(p); err != nil {
				return nil, err
			}
		default:
			return nil, protoErr("unexpected frame %q in a response", typ)
		}
	}
}

// checkManifest matches the files received (got: each one's name, size and
// digest as received) against the result's list.
func checkManifest(resp *Response, got []FileInfo) error {
	if len(resp.Result.Files) != len(resp.Files) {
		return protoErr("result lists %d files, %d were sent", len(resp.Result.Files), len(resp.Files))
	}
	for i, f := range got {
		if resp.Result.Files[i] != f {
			return protoErr("file %q does not match the result's manifest", f.Name)
		}
	}
	return nil
}
