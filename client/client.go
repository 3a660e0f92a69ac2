// Package client is a Go client of the renderbox API (openapi.yaml): submit
// a file or several, wait for the job with a context, download its outputs
// (checked against their digests), list jobs with an iterator, cancel, and
// verify a webhook.
//
//	c, err := client.New("https://render.example.com", os.Getenv("RENDERBOX_KEY"))
//	job, err := c.Submit(ctx, client.Request{Renderer: "html-pdf", Files: []client.File{client.FromPath("report.html")}})
//	job, err = c.Wait(ctx, job.ID, nil)
//	paths, err := c.DownloadAll(ctx, job, "out")
//
// Submissions are retried after 429 and 503 (honouring Retry-After) and
// after a connection that failed mid-request, always with the same
// Idempotency-Key (one is made when the request has none), so a retry never
// makes a second job.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/renderbox/renderbox/jobstate"
)

// Client talks to one renderbox API with one key. Its zero value is not
// usable; make one with New.
type Client struct {
	base *url.URL
	key  string
	// HTTP is the transport; http.DefaultClient when nil. Its Timeout, if
	// any, must exceed the long polls of Wait (30 s).
	HTTP *http.Client
	// MaxSubmitAttempts bounds the tries of one Submit (default 10).
	MaxSubmitAttempts int
}

// New returns a client of the API at baseURL (e.g. http://127.0.0.1:8080)
// that authenticates with key.
func New(baseURL, key string) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("renderbox: the server URL %q is not an http(s) URL", baseURL)
	}
	return &Client{base: u, key: key}, nil
}

// Job is a job as the API shows it.
type Job struct {
	ID          string         `json:"id"`
	Renderer    string         `json:"renderer"`
	State       jobstate.State `json:"state"`
	Attempts    int            `json:"attempts"`
	Options     map[string]any `json:"options,omitempty"`
	OutputName  string         `json:"output_name,omitempty"`
	SandboxMode string         `json:"sandbox_mode,omitempty"`
	Input       struct {
		SHA256 string `json:"sha256"`
		Size   int64  `json:"size"`
		Type   string `json:"type"`
	} `json:"input"`
	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Error      *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
	Outputs []Output `json:"outputs,omitempty"`
	// OutputsZipURL downloads every output as one ZIP once the job
	// succeeded; absolute or relative as Output.URL.
	OutputsZipURL string          `json:"outputs_zip_url,omitempty"`
	Webhook       json.RawMessage `json:"webhook,omitempty"`
	Worker        json.RawMessage `json:"worker,omitempty"`
	Diagnostics   json.RawMessage `json:"diagnostics,omitempty"`
}

// Terminal reports whether the job has ended (it changes no more).
func (j *Job) Terminal() bool {
	return j.State.Terminal()
}

// Output is one file a succeeded job made.
type Output struct {
	Name      string `json:"name"`
	MediaType string `json:"media_type"`
	// URL is absolute when the server has a public URL (api serve
	// -public-url), else relative to its base URL; the client takes both.
	URL    string `json:"url"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Error is a refusal from the API: an RFC 9457 problem with its code.
type Error struct {
	Status     int
	Code       string `json:"code"`
	Title      string `json:"title"`
	Detail     string `json:"detail"`
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	msg := e.Detail
	if msg == "" {
		msg = e.Title
	}
	if e.Code != "" {
		return fmt.Sprintf("renderbox: %d %s: %s", e.Status, e.Code, msg)
	}
	return fmt.Sprintf("renderbox: %d: %s", e.Status, msg)
}

// File is one input file: its name (kept in multi-file jobs, where pages
// refer to one another by it) and how to read it, once per attempt.
type File struct {
	Name string
	Open func() (io.ReadCloser, error)
}

// FromPath is the file at path, named by its base name.
func FromPath(path string) File {
	return File{Name: filepath.Base(path), Open: func() (io.ReadCloser, error) { return os.Open(path) }}
}

// FromBytes is a file held in memory.
func FromBytes(name string, b []byte) File {
	return File{Name: name, Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }}
}

// Request is a submission.
type Request struct {
	Renderer string
	// Files are the inputs, in order: one file, or a page and the files
	// it uses (html-pdf, html-png, markdown-pdf), or one of each PDF.
	Files []File
	// Options are the renderer's (GET /v1/renderers); Limits lower its
	// limits (timeout_seconds, memory_bytes, …).
	Options, Limits map[string]any
	CallbackURL     string
	OutputName      string
	// IdempotencyKey makes a resubmit return the first job; one is made
	// when empty, so that retries are safe.
	IdempotencyKey string
}

// Submit sends req and returns the accepted job (queued, or whatever an
// earlier submit with the same idempotency key made of it).
func (c *Client) Submit(ctx context.Context, req Request) (*Job, error) {
	if req.Renderer == "" || len(req.Files) == 0 {
		return nil, errors.New("renderbox: a request needs a renderer and at least one file")
	}
	if req.IdempotencyKey == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		req.IdempotencyKey = "client-" + hex.EncodeToString(b[:])
	}
	attempts := c.MaxSubmitAttempts
	if attempts <= 0 {
		attempts = 10
	}
	var last error
	for try := 1; try <= attempts; try++ {
		var job Job
		err := c.submitOnce(ctx, req, &job)
		if err == nil {
			return &job, nil
		}
		last = err
		var wait time.Duration
		var apiErr *Error
		switch {
		case ctx.Err() != nil:
			return nil, err
		case errors.As(err, &apiErr) && (apiErr.Status == 429 || apiErr.Status == 503):
			wait = max(apiErr.RetryAfter, time.Second)
		case errors.As(err, &apiErr):
			return nil, err // the request itself is refused: sending it again changes nothing
		default:
			wait = time.Duration(try) * time.Second // a connection that failed
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (while waiting to retry after: %v)", ctx.Err(), err)
		case <-time.After(wait):
		}
	}
	return nil, fmt.Errorf("renderbox: not accepted after %d attempts: %w", attempts, last)
}

func (c *Client) submitOnce(ctx context.Context, req Request, job *Job) error {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() { pw.CloseWithError(writeForm(mw, req)) }()
	hreq, err := c.request(ctx, "POST", "/v1/jobs", pr)
	if err != nil {
		pr.Close()
		return err
	}
	hreq.Header.Set("Content-Type", mw.FormDataContentType())
	hreq.Header.Set("Idempotency-Key", req.IdempotencyKey)
	return c.doJSON(hreq, job)
}

// writeForm writes the multipart body: the renderer first (the API then
// bounds the input by that renderer's limit as it arrives), then the
// fields, then the files.
func writeForm(mw *multipart.Writer, req Request) error {
	fields := [][2]string{{"renderer", req.Renderer}}
	for name, v := range map[string]map[string]any{"options": req.Options, "limits": req.Limits} {
		if len(v) > 0 {
			b, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("renderbox: %s: %w", name, err)
			}
			fields = append(fields, [2]string{name, string(b)})
		}
	}
	if req.CallbackURL != "" {
		fields = append(fields, [2]string{"callback_url", req.CallbackURL})
	}
	if req.OutputName != "" {
		fields = append(fields, [2]string{"output_name", req.OutputName})
	}
	for _, f := range fields {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			return err
		}
	}
	for _, f := range req.Files {
		r, err := f.Open()
		if err != nil {
			return fmt.Errorf("renderbox: %s: %w", f.Name, err)
		}
		w, err := mw.CreateFormFile("file", f.Name)
		if err == nil {
			_, err = io.Copy(w, r)
		}
		r.Close()
		if err != nil {
			return err
		}
	}
	return mw.Close()
}

// Get returns the job with id.
func (c *Client) Get(ctx context.Context, id string) (*Job, error) {
	return c.getJob(ctx, id, 0)
}

func (c *Client) getJob(ctx context.Context, id string, wait int) (*Job, error) {
	path := "/v1/jobs/" + url.PathEscape(id)
	if wait > 0 {
		path += "?wait=" + strconv.Itoa(wait)
	}
	req, err := c.request(ctx, "GET", path, nil)
	if err != nil {
		return nil, err
	}
	var j Job
	return &j, c.doJSON(req, &j)
}

// Wait long-polls the job until it ends or ctx is done, calling progress
// (when not nil) with each state it sees. A connection that fails is
// tried again a second later: an API replica restarting is not the job's
// end.
func (c *Client) Wait(ctx context.Context, id string, progress func(*Job)) (*Job, error) {
	for {
		j, err := c.getJob(ctx, id, 30)
		var apiErr *Error
		switch {
		case err == nil:
			if progress != nil {
				progress(j)
			}
			if j.Terminal() {
				return j, nil
			}
			continue
		case ctx.Err() != nil:
			return nil, err
		case errors.As(err, &apiErr) && apiErr.Status != 429 && apiErr.Status != 503:
			return nil, err
		}
		retry := time.Second
		if errors.As(err, &apiErr) {
			retry = max(apiErr.RetryAfter, time.Second)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(retry):
		}
	}
}

// Cancel cancels the job (a queued one never runs, a running one is
// stopped) and returns it.
func (c *Client) Cancel(ctx context.Context, id string) (*Job, error) {
	req, err := c.request(ctx, "DELETE", "/v1/jobs/"+url.PathEscape(id), nil)
	if err != nil {
		return nil, err
	}
	var j Job
	return &j, c.doJSON(req, &j)
}

// ListOptions filter a listing.
type ListOptions struct {
	State jobstate.State // "" for every state
	Limit int            // page size; the server's default when 0
}

// Jobs iterates over the key's jobs, newest first, page by page. An error
// ends the iteration, yielded with a nil job.
func (c *Client) Jobs(ctx context.Context, opts ListOptions) iter.Seq2[*Job, error] {
	return func(yield func(*Job, error) bool) {
		cursor := ""
		for {
			q := url.Values{}
			if opts.State != "" {
				q.Set("state", string(opts.State))
			}
			if opts.Limit > 0 {
				q.Set("limit", strconv.Itoa(opts.Limit))
			}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			path := "/v1/jobs"
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			var page struct {
				Jobs []*Job `json:"jobs"`
				Next string `json:"next_cursor"`
			}
			req, err := c.request(ctx, "GET", path, nil)
			if err == nil {
				err = c.doJSON(req, &page)
			}
			if err != nil {
				yield(nil, err)
				return
			}
			for _, j := range page.Jobs {
				if !yield(j, nil) {
					return
				}
			}
			if page.Next == "" {
				return
			}
			cursor = page.Next
		}
	}
}

// Renderer is one entry of the catalogue.
type Renderer struct {
	Name          string            `json:"name"`
	Description   string            `json:"description"`
	Inputs        []string          `json:"inputs"`
	Output        string            `json:"output"`
	MaxInputBytes int64             `json:"max_input_bytes"`
	Options       []json.RawMessage `json:"options"`
	Limits        map[string]any    `json:"limits"`
}

// Renderers returns the catalogue.
func (c *Client) Renderers(ctx context.Context) ([]Renderer, error) {
	req, err := c.request(ctx, "GET", "/v1/renderers", nil)
	if err != nil {
		return nil, err
	}
	var l struct {
		Renderers []Renderer `json:"renderers"`
	}
	return l.Renderers, c.doJSON(req, &l)
}

// Download writes the output to w and checks it against its SHA-256.
func (c *Client) Download(ctx context.Context, o Output, w io.Writer) error {
	req, err := c.request(ctx, "GET", o.URL, nil)
	if err != nil {
		return err
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return problem(resp)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), resp.Body)
	if err != nil {
		return fmt.Errorf("renderbox: downloading %s: %w", o.Name, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != o.SHA256 || n != o.Size {
		return fmt.Errorf("renderbox: %s arrived as %d bytes with SHA-256 %s, want %d bytes with %s", o.Name, n, got, o.Size, o.SHA256)
	}
	return nil
}

// DownloadAll writes every output of a succeeded job into dir (made if
// missing) under its name and returns the paths. A file that fails its
// digest is removed.
func (c *Client) DownloadAll(ctx context.Context, j *Job, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, o := range j.Outputs {
		// The server names outputs; still, a name is only ever a file in dir.
		if o.Name == "" || o.Name != filepath.Base(o.Name) || o.Name == "." || o.Name == ".." {
			return paths, fmt.Errorf("renderbox: refusing the output name %q", o.Name)
		}
		p := filepath.Join(dir, o.Name)
		f, err := os.Create(p)
		if err != nil {
			return paths, err
		}
		err = c.Download(ctx, o, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(p)
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// request makes a request for path (absolute, or relative to the base
// URL) with the key. An absolute URL must be on the base URL's origin:
// the key is not sent anywhere else, whatever URL an answer names.
func (c *Client) request(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	ref, err := url.Parse(path)
	if err != nil {
		return nil, err
	}
	u := c.base.ResolveReference(ref)
	if ref.Host == "" {
		// Relative to the base URL's path too (a server behind a prefix).
		u = c.base.JoinPath(ref.Path)
		u.RawQuery = ref.RawQuery
	} else if !strings.EqualFold(u.Scheme, c.base.Scheme) || !strings.EqualFold(u.Host, c.base.Host) {
		return nil, fmt.Errorf("renderbox: the server named %s, not on %s://%s, where the key goes: "+
			"use the server's public URL (its -public-url) as the client's base URL", u.Redacted(), c.base.Scheme, c.base.Host)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	req.Header.Set("Accept", "application/json")
	return req, nil
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// doJSON sends req and decodes a 2xx answer into v, or returns the
// problem.
func (c *Client) doJSON(req *http.Request, v any) error {
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return problem(resp)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(v); err != nil {
		return fmt.Errorf("renderbox: %s %s: reading the answer: %w", req.Method, req.URL.Path, err)
	}
	return nil
}

// problem reads an error answer.
func problem(resp *http.Response) error {
	e := &Error{Status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, e) != nil || (e.Code == "" && e.Detail == "" && e.Title == "") {
		e.Detail = strings.TrimSpace(string(b))
		if e.Detail == "" {
			e.Detail = http.StatusText(resp.StatusCode)
		}
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}
