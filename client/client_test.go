package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/client"
	"github.com/renderbox/renderbox/internal/apifake"
)

func newClient(t *testing.T, base, key string) *client.Client {
	t.Helper()
	c, err := client.New(base, key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A key read from a file with its newline, and a file that is not there,
// fail at once (they used to be retried for 55 s), and send nothing.
func TestPermanentMistakesFailAtOnce(t *testing.T) {
	api := apifake.Start("rb_test")
	defer api.Close()
	start := time.Now()
	if _, err := client.New(api.URL, "rb_test\n"); err == nil || !strings.Contains(err.Error(), "newline") {
		t.Errorf("a key with a trailing newline: %v, want an error naming the newline", err)
	}
	c := newClient(t, api.URL, "rb_test")
	var attempts []client.Attempt
	c.OnRetry = func(a client.Attempt) { attempts = append(attempts, a) }
	_, err := c.Submit(context.Background(), client.Request{Renderer: "html-pdf", Files: []client.File{client.FromPath(filepath.Join(t.TempDir(), "gone.html"))}})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
	// A refusal (400) is tried once.
	_, err = c.Submit(context.Background(), client.Request{Renderer: "html-pdfx", Files: []client.File{client.FromBytes("a.html", []byte("<p>x"))}})
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Code != "unknown_renderer" {
		t.Errorf("an unknown renderer: %v, want a 400 unknown_renderer *client.Error", err)
	}
	if len(attempts) != 1 || attempts[0].Next != 0 {
		t.Errorf("attempts reported: %+v, want the one refused, with no next", attempts)
	}
	// A host name that does not resolve (the dialer says so, as the
	// resolver would, without depending on the machine's DNS).
	nowhere := newClient(t, "http://renderbox.invalid", "rb_test")
	nowhere.HTTP = &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "renderbox.invalid", IsNotFound: true}}
	}}}
	if _, err := nowhere.Submit(context.Background(), client.Request{Renderer: "svg-png", Files: []client.File{client.FromBytes("a.svg", []byte("<svg/>"))}}); err == nil || client.Transient(err) {
		t.Errorf("a host that does not resolve: %v, want a permanent error", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the four mistakes took %s, want under 1 s", d)
	}
	if n := len(api.Submissions()); n != 0 {
		t.Errorf("%d submissions reached the server, want 0", n)
	}
}

// A server that is down is tried again with a growing pause, each attempt
// reported, and given up within MaxRetryTime.
func TestServerDownFailsWithinTheBound(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now: connection refused
	c := newClient(t, "http://"+addr, "rb_test")
	c.MaxRetryTime = 2 * time.Second
	var attempts []client.Attempt
	c.OnRetry = func(a client.Attempt) { attempts = append(attempts, a) }
	start := time.Now()
	_, err = c.Submit(context.Background(), client.Request{Renderer: "svg-png", Files: []client.File{client.FromBytes("a.svg", []byte("<svg/>"))}})
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "gave up after") || !strings.Contains(err.Error(), "refused") {
		t.Errorf("a server that is down: %v, want a give-up naming the refused connection", err)
	}
	if took > c.MaxRetryTime+500*time.Millisecond {
		t.Errorf("gave up after %s, want within the bound %s", took, c.MaxRetryTime)
	}
	if len(attempts) < 3 || attempts[len(attempts)-1].Next != 0 {
		t.Fatalf("attempts reported: %+v, want at least 3, the last without a next", attempts)
	}
	for i, a := range attempts {
		if a.N != i+1 || a.Op != "submit" || a.Err == nil || !client.Transient(a.Err) {
			t.Errorf("attempt %d: %+v", i+1, a)
		}
		if i > 0 && i < len(attempts)-1 && a.Next <= attempts[i-1].Next {
			t.Errorf("attempt %d paused %s after %s: want a growing pause", i+1, a.Next, attempts[i-1].Next)
		}
	}
	t.Logf("%d attempts in %s", len(attempts), took)
}

// 429 with Retry-After, then 503, then the job: the pauses follow the
// server, one job is made, with one idempotency key.
func TestTransientRefusalsAreRetried(t *testing.T) {
	api := apifake.Start("rb_test")
	defer api.Close()
	var keys []string
	api.Refuse = func(r *http.Request) *apifake.Refusal {
		if r.Method != "POST" {
			return nil
		}
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		switch len(keys) {
		case 1:
			return &apifake.Refusal{Status: 429, Code: "rate_limited", Detail: "slow down", RetryAfter: "1"}
		case 2:
			return &apifake.Refusal{Status: 503, Code: "unavailable", Detail: "Redis does not answer"}
		}
		return nil
	}
	c := newClient(t, api.URL, "rb_test")
	var attempts []client.Attempt
	c.OnRetry = func(a client.Attempt) { attempts = append(attempts, a) }
	j, err := c.Submit(context.Background(), client.Request{Renderer: "svg-png", Files: []client.File{client.FromBytes("a.svg", []byte("<svg/>"))}})
	if err != nil || j.State != "queued" {
		t.Fatalf("Submit: %+v %v", j, err)
	}
	if len(attempts) != 2 || attempts[0].Next != time.Second || attempts[1].Next != 500*time.Millisecond {
		t.Errorf("attempts: %+v, want 2 (429 paused by its Retry-After, 503 by the backoff)", attempts)
	}
	if len(keys) != 3 || keys[0] == "" || keys[1] != keys[0] || keys[2] != keys[0] {
		t.Errorf("idempotency keys sent: %q, want one key three times", keys)
	}
}

// Wait on a job that fails returns the job and a *JobError with its code;
// DownloadAll of it is that error too, not an empty list. Its progress
// sees the job run, then its sandbox's mode, before the end.
func TestWaitOnAFailedJobIsAJobError(t *testing.T) {
	api := apifake.Start("rb_test")
	defer api.Close()
	c := newClient(t, api.URL, "rb_test")
	ctx := context.Background()
	j, err := c.Submit(ctx, client.Request{Renderer: "pdf-png", Files: []client.File{client.FromBytes("a.pdf", []byte("%PDF-1.4\nbroken"))}})
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	j, err = c.Wait(ctx, j.ID, func(j *client.Job) { states = append(states, strings.TrimSpace(string(j.State)+" "+j.SandboxMode)) })
	var jobErr *client.JobError
	if !errors.As(err, &jobErr) || jobErr.Code != "render_failed" || j == nil || j.State != "failed" || jobErr.Job != j {
		t.Fatalf("Wait: %+v %v, want the failed job and a *JobError render_failed", j, err)
	}
	if !strings.Contains(err.Error(), "render_failed") || strings.Join(states, ",") != "running,running prebooted,failed prebooted" {
		t.Errorf("error %q, states seen %v", err, states)
	}
	paths, err := c.DownloadAll(ctx, j, t.TempDir())
	if !errors.As(err, &jobErr) || paths != nil {
		t.Errorf("DownloadAll of a failed job: %v %v, want the *JobError", paths, err)
	}
}

// Files keep their relative paths; a directory is sent as its tree with
// index.html first; the request's fields reach the server as JSON.
func TestFilesAndFields(t *testing.T) {
	if got := client.FromPath("css/style.css").Name; got != "css/style.css" {
		t.Errorf("FromPath(css/style.css) is named %q", got)
	}
	for path, want := range map[string]string{"./a/../report.html": "report.html", "/tmp/x/report.html": "report.html", "../up/page.html": "page.html"} {
		if got := client.FromPath(path).Name; got != want {
			t.Errorf("FromPath(%s) is named %q, want %q", path, got, want)
		}
	}
	dir := t.TempDir()
	for name, body := range map[string]string{
		"index.html": `<link rel="stylesheet" href="css/style.css"><img src="img/logo.png">`, "css/style.css": "h1{}",
		"img/logo.png": "png", "a.txt": "a", ".git/config": "x", ".hidden": "x",
	} {
		_ = os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	files, err := client.FromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	if strings.Join(names, " ") != "index.html a.txt css/style.css img/logo.png" {
		t.Errorf("FromDir: %q", names)
	}
	if _, err := client.FromDir(filepath.Join(dir, "css")); err == nil || !strings.Contains(err.Error(), "index.html") {
		t.Errorf("FromDir without an index.html: %v", err)
	}

	api := apifake.Start("rb_test")
	defer api.Close()
	c := newClient(t, api.URL, "rb_test")
	ctx := context.Background()
	j, err := c.Submit(ctx, client.Request{Renderer: "html-pdf", Files: files, InputType: "text/html",
		Limits: map[string]any{"timeout_seconds": 10}, Then: []client.Step{{Renderer: "pdf-protect", Options: map[string]any{"owner_password": "o"}}},
		DownloadFrom: []client.Download{{URL: "https://example.com/a.png", Headers: map[string]string{"X-A": "1"}, Name: "img/a.png"}}})
	if err != nil {
		t.Fatal(err)
	}
	if j, err = c.Wait(ctx, j.ID, nil); err != nil || j.Renderer != "html-pdf|pdf-protect" || len(j.Diagnostics) != 0 {
		t.Errorf("Wait: %+v %v (no file should be missing)", j, err)
	}
	sub := api.Submissions()[0]
	var sent []string
	for _, f := range sub.Files {
		sent = append(sent, f.Name)
	}
	if strings.Join(sent, " ") != strings.Join(names, " ") {
		t.Errorf("sent %q, want %q", sent, names)
	}
	var dl []map[string]any
	_ = json.Unmarshal([]byte(sub.Fields["download_from"]), &dl)
	if sub.Fields["input_type"] != "text/html" || sub.Fields["limits"] != `{"timeout_seconds":10}` ||
		sub.Fields["then"] != `[{"renderer":"pdf-protect","options":{"owner_password":"o"}}]` ||
		len(dl) != 1 || dl[0]["url"] != "https://example.com/a.png" || dl[0]["name"] != "img/a.png" || dl[0]["headers"].(map[string]any)["X-A"] != "1" {
		t.Errorf("fields sent: %q", sub.Fields)
	}
}

// Renderers reads every field the catalogue has: GET /v1/renderers
// decoded with unknown fields refused.
func TestRenderersReadsTheWholeCatalogue(t *testing.T) {
	api := apifake.Start("rb_test")
	defer api.Close()
	req, _ := http.NewRequest("GET", api.URL+"/v1/renderers", nil)
	req.Header.Set("Authorization", "Bearer rb_test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	dec.DisallowUnknownFields()
	var l struct {
		Renderers []client.Renderer `json:"renderers"`
	}
	if err := dec.Decode(&l); err != nil {
		t.Fatalf("the catalogue has a field client.Renderer or client.Option lacks: %v", err)
	}
	rs, err := newClient(t, api.URL, "rb_test").Renderers(context.Background())
	if err != nil || len(rs) != len(l.Renderers) || len(rs) < 10 {
		t.Fatalf("Renderers: %d, %v", len(rs), err)
	}
}
