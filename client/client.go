// Package client is a Go client of the renderbox API (openapi.yaml): submit
// a file, a page with the files it loads, or a directory tree; wait for the
// job with a context; download its outputs (checked against their digests);
// list jobs with an iterator; cancel; and verify a webhook. docs/client.md
// is its guide.
//
//	c, err := client.New("https://render.example.com", os.Getenv("RENDERBOX_KEY"))
//	job, err := c.Submit(ctx, client.Request{Renderer: "html-pdf", Files: []client.File{client.FromPath("report.html")}})
//	job, err = c.Wait(ctx, job.ID, nil) // a *JobError when the job failed or was canceled
//	paths, err := c.DownloadAll(ctx, job, "out")
//
// # Failures
//
// What cannot succeed fails at once: a key no HTTP header can carry (New),
// a local file that cannot be read, a host name that does not resolve, a
// certificate that is not trusted, and every refusal (4xx) but 408 and
// 429. What may pass (a connection refused or cut, 5xx, 408, 429) is tried
// again with a growing pause (Retry-After when the server gives one), for
// at most Client.MaxRetryTime in all (30 s by default), each failed attempt
// reported to Client.OnRetry. Submit always resends with the same
// Idempotency-Key (one is made when the request has none), so a retry
// never makes a second job. A job that ends failed or canceled is an error
// of its own, *JobError, carrying the job's error code.
package client

import (
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
	// MaxRetryTime bounds the time spent retrying transient failures of
	// one call (Submit, or a run of failed polls in Wait); 30 s when 0,
	// no retry at all when negative.
	MaxRetryTime time.Duration
	// OnRetry, when not nil, is called with every attempt that failed and
	// whether another follows.
	OnRetry func(Attempt)
}

// Attempt is one failed try of a call, as Client.OnRetry sees it.
type Attempt struct {
	Op      string        // "submit" or "wait"
	N       int           // 1 for the first try
	Err     error         // why it failed
	Elapsed time.Duration // since the call's first try
	// Next is the pause before the next try; 0 when there is none (the
	// failure is permanent, or the attempts or MaxRetryTime ran out).
	Next time.Duration
}

// New returns a client of the API at baseURL (e.g. http://127.0.0.1:8080)
// that authenticates with key. A key with a character an HTTP header
// cannot carry (a trailing newline read from a file, a space) is refused
// here rather than on every request.
func New(baseURL, key string) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("renderbox: the server URL %q is not an http(s) URL", baseURL)
	}
	for i := 0; i < len(key); i++ {
		if key[i] <= ' ' || key[i] > '~' {
			return nil, fmt.Errorf("renderbox: the API key has %q at byte %d of %d, which an HTTP header cannot carry (trim the newline or space from the key file)", key[i:i+1], i+1, len(key))
		}
	}
	return &Client{base: u, key: key}, nil
}

// Job is a job as the API shows it.
type Job struct {
	ID         string         `json:"id"`
	Renderer   string         `json:"renderer"`
	State      jobstate.State `json:"state"`
	Attempts   int            `json:"attempts"`
	Options    map[string]any `json:"options,omitempty"`
	OutputName string         `json:"output_name,omitempty"`
	// SandboxMode is how the sandbox of the job's last attempt was made
	// (cold, prebooted, restored): shown while it runs, once the worker
	// took the sandbox, and kept when the job ends.
	SandboxMode string `json:"sandbox_mode,omitempty"`
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

// JobError is a job that ended failed or canceled, as Wait and
// DownloadAll return it; Code is the job's error code (render_failed,
// timeout, canceled, …; openapi.yaml lists them).
type JobError struct {
	Job     *Job
	Code    string
	Message string
}

func (e *JobError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("renderbox: job %s %s: %s", e.Job.ID, e.Job.State, e.Code)
	}
	return fmt.Sprintf("renderbox: job %s %s: %s: %s", e.Job.ID, e.Job.State, e.Code, e.Message)
}

// jobError is the error of a job that ended without succeeding, or nil.
func jobError(j *Job) error {
	if j.State == jobstate.Succeeded || !j.Terminal() {
		return nil
	}
	e := &JobError{Job: j, Code: string(j.State)}
	if j.Error != nil {
		e.Code, e.Message = j.Error.Code, j.Error.Message
	}
	return e
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

// Request is a submission.
type Request struct {
	Renderer string
	// Files are the inputs, in order: one file, or a page and the files
	// it uses (html-pdf, html-png, markdown-pdf; FromDir), or one of each
	// PDF.
	Files []File
	// InputType declares the input's media type where its bytes do not
	// tell it (text/csv, text/markdown, …; openapi.yaml's InputType).
	InputType string
	// Options are the renderer's (GET /v1/renderers); Limits lower its
	// limits (timeout_seconds, memory_bytes, …).
	Options, Limits map[string]any
	// Then chains renderers after Renderer, each on the output of the
	// one before (html-pdf then pdf-protect).
	Then []Step
	// DownloadFrom names inputs the server fetches itself.
	DownloadFrom []Download
	// URL is the page's address, in place of Files (html-pdf, html-png):
	// the server's worker fetches the page and all it loads.
	URL         string
	CallbackURL string
	OutputName  string
	// IdempotencyKey makes a resubmit return the first job; one is made
	// when empty, so that retries are safe.
	IdempotencyKey string
}

// Step is one renderer of a chain after the first, with its options.
type Step struct {
	Renderer string         `json:"renderer"`
	Options  map[string]any `json:"options,omitempty"`
}

// Download is an input the server fetches from URL (with Headers),
// named Name in the job.
type Download struct {
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	Name    string            `json:"name,omitempty"`
}

// Submit sends req and returns the accepted job (queued, or whatever an
// earlier submit with the same idempotency key made of it). Every file is
// opened once before anything is sent, so a missing one fails at once.
func (c *Client) Submit(ctx context.Context, req Request) (*Job, error) {
	if req.Renderer == "" || len(req.Files) == 0 && len(req.DownloadFrom) == 0 && req.URL == "" {
		return nil, errors.New("renderbox: a request needs a renderer and at least one file")
	}
	for _, f := range req.Files {
		if f.Open == nil {
			return nil, fmt.Errorf("renderbox: the file %q has no Open", f.Name)
		}
		r, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("renderbox: %s: %w", f.Name, err)
		}
		r.Close()
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
	r := c.retrier("submit")
	for {
		var job Job
		err := c.submitOnce(ctx, req, &job)
		if err == nil {
			return &job, nil
		}
		if err := r.pause(ctx, err, r.n+1 >= attempts); err != nil {
			return nil, err
		}
	}
}

func (c *Client) submitOnce(ctx context.Context, req Request, job *Job) error {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	formErr := make(chan error, 1)
	go func() {
		err := writeForm(mw, req)
		formErr <- err
		pw.CloseWithError(err)
	}()
	hreq, err := c.request(ctx, "POST", "/v1/jobs", pr)
	if err != nil {
		pr.Close()
		return err
	}
	hreq.Header.Set("Content-Type", mw.FormDataContentType())
	hreq.Header.Set("Idempotency-Key", req.IdempotencyKey)
	err = c.doJSON(hreq, job)
	pr.CloseWithError(errors.New("the request ended"))
	// A file that could not be read is the request's fault, not the
	// connection's: it is not tried again.
	var local *localError
	if ferr := <-formErr; err != nil && errors.As(ferr, &local) {
		return local
	}
	return err
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
// (when not nil) with each state it sees (polling each second while the
// job is queued, and while it runs until its SandboxMode shows, so that
// its start and its sandbox are seen). It returns the job, and a
// *JobError with it when the job ended failed or canceled. A poll that
// fails transiently (an API replica restarting is not the job's end) is
// tried again as Submit is, for at most MaxRetryTime in a row.
func (c *Client) Wait(ctx context.Context, id string, progress func(*Job)) (*Job, error) {
	r := c.retrier("wait")
	var last *Job
	for {
		// The API answers a long poll when the job ends; while the job is
		// queued, or runs before its sandbox is taken, short polls let
		// progress see it start and see its sandbox.
		wait := 30
		if progress != nil && (last == nil || last.State == jobstate.Queued || last.State == jobstate.Running && last.SandboxMode == "") {
			wait = 1
		}
		j, err := c.getJob(ctx, id, wait)
		if err == nil {
			last = j
			r = c.retrier("wait")
			if progress != nil {
				progress(j)
			}
			if j.Terminal() {
				return j, jobError(j)
			}
			continue
		}
		if err := r.pause(ctx, err, false); err != nil {
			return nil, err
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
	Name          string         `json:"name"`
	Description   string         `json:"description"`
	Inputs        []string       `json:"inputs"`
	Output        string         `json:"output"`
	MaxInputBytes int64          `json:"max_input_bytes"`
	MaxPages      int            `json:"max_pages,omitempty"`
	MaxPixels     int64          `json:"max_pixels,omitempty"`
	Options       []Option       `json:"options"`
	Limits        map[string]any `json:"limits"`
}

// Option is one option a renderer takes, with its type and bounds.
type Option struct {
	Name        string   `json:"name"`
	Type        string   `json:"type"` // integer, number, boolean, string
	Description string   `json:"description"`
	Default     any      `json:"default,omitempty"`
	Minimum     *float64 `json:"minimum,omitempty"`
	Maximum     *float64 `json:"maximum,omitempty"`
	Enum        []string `json:"enum,omitempty"`
	// Pattern is a regular expression a string value matches in full.
	Pattern   string `json:"pattern,omitempty"`
	MaxLength int    `json:"max_length,omitempty"`
	// CaseInsensitive: an Enum value matches in any case.
	CaseInsensitive bool `json:"case_insensitive,omitempty"`
	// Secret: the value is shown nowhere (the job reads [redacted]).
	Secret bool `json:"secret,omitempty"`
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
// digest is removed. A job that did not succeed is an error (a *JobError
// when it failed or was canceled), not an empty list.
func (c *Client) DownloadAll(ctx context.Context, j *Job, dir string) ([]string, error) {
	if j.State != jobstate.Succeeded {
		if err := jobError(j); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("renderbox: job %s is %s: it has no outputs until it succeeds (Wait for it)", j.ID, j.State)
	}
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
		if ctx := req.Context(); ctx.Err() != nil || unanswerable(err) {
			return err
		}
		return &transportError{err}
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
