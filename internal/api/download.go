package api

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/renderbox/renderbox/internal/egress"
	"github.com/renderbox/renderbox/internal/fetch"
	"github.com/renderbox/renderbox/internal/render"
)

// RemoteContent configures download_from: a job's input fetched by the API
// from URLs the client names, under the egress policy (docs/security.md,
// "Fetching on the host"). The zero value refuses download_from.
type RemoteContent struct {
	Enabled bool
	// Policy: where fetches may go (public addresses only by default).
	Policy egress.Policy
	// Resolver looks names up; nil means the system's.
	Resolver egress.Resolver
	// Limits bound one submission's fetches.
	Limits fetch.Limits
	// Timeout bounds all of one submission's fetches. Default 60s.
	Timeout time.Duration
	// MaxPerKey bounds the submissions one key has fetching at once (429
	// too_many_requests past it), each fetching one URL at a time: the
	// workers' -remote-max-per-key of the same meaning. Default 4.
	MaxPerKey int
}

// maxDownloads bounds download_from's entries.
const maxDownloads = 64

// downloadSpec is one entry of download_from.
type downloadSpec struct {
	URL string `json:"url"`
	// Headers are sent with the request and never recorded: they often
	// carry credentials.
	Headers map[string]string `json:"headers"`
	// Name is the file's path among the job's files; without it, the
	// response's Content-Disposition filename, else the URL path's base
	// name.
	Name string `json:"name"`
}

// refusedHeaders are headers a client may not set on a fetch: the
// transport's own (framing, the connection, the host it dials).
var refusedHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Upgrade", "Te", "Trailer", "Proxy-Authorization", "Proxy-Connection"}

// parseDownloads reads download_from: a list of 1 to maxDownloads
// {"url", "headers", "name"}.
func parseDownloads(raw json.RawMessage) ([]downloadSpec, error) {
	var specs []downloadSpec
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&specs); err != nil {
		return nil, fmt.Errorf("%w: download_from: want a list of {\"url\": …, \"headers\": {…}, \"name\": …}: %v", errBadRequest, err)
	}
	if len(specs) == 0 || len(specs) > maxDownloads {
		return nil, fmt.Errorf("%w: download_from holds %d URLs; give 1 to %d", errBadRequest, len(specs), maxDownloads)
	}
	for i, sp := range specs {
		if sp.URL == "" {
			return nil, fmt.Errorf("%w: download_from[%d] has no url", errBadRequest, i)
		}
		if sp.Name != "" {
			if err := checkPartName(sp.Name, nil); err != nil {
				return nil, fmt.Errorf("download_from[%d]: %w", i, err)
			}
		}
		for k, v := range sp.Headers {
			ck := http.CanonicalHeaderKey(k)
			if !validHeaderName(k) || strings.ContainsAny(v, "\r\n\x00") {
				// The value is not quoted back: it may be a secret.
				return nil, fmt.Errorf("%w: download_from[%d]: header %s: a name of token characters and a value without line breaks", errBadRequest, i, quoteBounded(k))
			}
			for _, r := range refusedHeaders {
				if ck == r {
					return nil, fmt.Errorf("%w: download_from[%d]: header %s is the transport's to set", errBadRequest, i, ck)
				}
			}
		}
	}
	return specs, nil
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range []byte(k) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// downloadError is a download_from entry that could not be had: the URL
// (without secrets) and why.
type downloadError struct {
	i   int
	url string
	err error
}

func (e *downloadError) Error() string {
	return fmt.Sprintf("download_from[%d] %s: %v", e.i, e.url, e.err)
}

func (e *downloadError) Unwrap() error { return e.err }

// download fetches the input sub.DownloadFrom names, bounded by rd's input
// limit as the bytes arrive: one URL is the input as it came, several are
// packed into a ZIP of stored entries as several file parts would be. It
// returns the fetches' records, refusals among them.
func (s *Server) download(ctx context.Context, sub *submission, rd *render.Renderer) ([]fetch.Record, error) {
	specs, err := parseDownloads(sub.DownloadFrom)
	if err != nil {
		return nil, err
	}
	if len(specs) > 1 && !rd.TakesSeveralFiles() {
		// Refused before any fetch, in the client's terms: several URLs
		// would be packed into a ZIP the renderer does not take.
		return nil, fmt.Errorf("%w: %s takes one file, and download_from holds %d URLs; send each in a job of its own", render.ErrUnsupportedInput, rd.Name, len(specs))
	}
	ctx, cancel := context.WithTimeout(ctx, s.Remote.Timeout)
	defer cancel()
	sess := s.fetcher.Session()
	input := &inputBuffer{max: rd.MaxInputBytes, who: rd.Name}
	// One allocation of the declared size, as an upload's Content-Length
	// gives it (inputBuffer.hint).
	sized := func(resp *fetch.Response) error {
		input.hint = resp.ContentLength
		return nil
	}
	header := func(sp downloadSpec) http.Header {
		h := http.Header{}
		for k, v := range sp.Headers {
			h.Set(k, v)
		}
		return h
	}
	if len(specs) == 1 {
		sp := specs[0]
		resp, err := sess.Fetch(ctx, fetch.Request{URL: sp.URL, Header: header(sp), Max: rd.MaxInputBytes, Head: sized}, input)
		if err != nil {
			return sess.Records(), &downloadError{0, fetch.Redact(sp.URL), err}
		}
		sub.Input, sub.PartType = input.b, partType(resp.Header.Get("Content-Type"))
		return sess.Records(), nil
	}
	zw := zip.NewWriter(input)
	names := map[string]bool{}
	for i, sp := range specs {
		entry := &lazyWriter{}
		head := func(resp *fetch.Response) error {
			name := downloadName(sp, resp)
			if err := checkPartName(name, names); err != nil {
				return fmt.Errorf("%w (name it with \"name\")", err)
			}
			names[name] = true
			w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
			entry.w = w
			return err
		}
		_, err := sess.Fetch(ctx, fetch.Request{URL: sp.URL, Header: header(sp), Max: max(1, rd.MaxInputBytes-int64(len(input.b))), Head: head}, entry)
		if err != nil {
			return sess.Records(), &downloadError{i, fetch.Redact(sp.URL), err}
		}
	}
	if err := zw.Close(); err != nil {
		return sess.Records(), err
	}
	sub.Input, sub.PartType = input.b, ""
	return sess.Records(), nil
}

// lazyWriter writes to the ZIP entry Head made.
type lazyWriter struct{ w io.Writer }

func (l *lazyWriter) Write(p []byte) (int, error) { return l.w.Write(p) }

// downloadName is a fetched file's name: the client's, else the
// response's Content-Disposition filename, else the URL path's base name.
func downloadName(sp downloadSpec, resp *fetch.Response) string {
	if sp.Name != "" {
		return sp.Name
	}
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil && params["filename"] != "" {
		return path.Base(params["filename"])
	}
	if u, err := url.Parse(sp.URL); err == nil {
		if b := path.Base(u.Path); b != "/" && b != "." {
			return b
		}
	}
	return ""
}

// downloadProblem answers a download_from that could not be had, with the
// fetches made in the problem's fetched member.
func downloadProblem(w http.ResponseWriter, err error, recs []fetch.Record) {
	status, code := http.StatusUnprocessableEntity, "download_failed"
	switch {
	case errors.Is(err, render.ErrInputTooLarge), errors.Is(err, fetch.ErrTooLarge):
		status, code = http.StatusRequestEntityTooLarge, "input_too_large"
	case errors.Is(err, egress.ErrRefused):
		status, code = http.StatusBadRequest, "download_refused"
	case errors.Is(err, errBadRequest):
		status, code = http.StatusBadRequest, "invalid_request"
	case errors.Is(err, render.ErrUnsupportedInput):
		status, code = http.StatusBadRequest, "unsupported_input"
	case !errors.As(err, new(*downloadError)):
		status, code = http.StatusInternalServerError, "internal"
	}
	var ext map[string]any
	if len(recs) > 0 {
		ext = map[string]any{"fetched": recs}
	}
	problemWith(w, status, code, err.Error(), ext)
}

// fetchedDiagnostics is the job's diagnostics at intake: the inputs
// fetched for it; nil when none were.
func fetchedDiagnostics(recs []fetch.Record) json.RawMessage {
	if len(recs) == 0 {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"fetched": recs})
	return b
}
