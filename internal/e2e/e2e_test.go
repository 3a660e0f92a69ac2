//go:build !unit

package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/internal/testenv/exe"
)

// jobJSON is a job view as the tests read it.
// jobError is a failed job's error.
type jobError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// outcome is how a job ended as "state" or "state:code", as the hostile
// corpus's cases list what they accept.
func outcome(state string, e *jobError) string {
	if e != nil {
		return state + ":" + e.Code
	}
	return state
}

type jobJSON struct {
	ID          string `json:"id"`
	Renderer    string `json:"renderer"`
	State       string `json:"state"`
	Attempts    int    `json:"attempts"`
	SandboxMode string `json:"sandbox_mode"`
	Worker      *struct {
		Name         string `json:"name"`
		RootfsDigest string `json:"rootfs_digest"`
	} `json:"worker"`
	Options    map[string]any `json:"options"`
	CreatedAt  time.Time      `json:"created_at"`
	StartedAt  *time.Time     `json:"started_at"`
	FinishedAt *time.Time     `json:"finished_at"`
	Input      struct {
		SHA256 string `json:"sha256"`
	} `json:"input"`
	Error   *jobError `json:"error"`
	Outputs []struct {
		Name      string `json:"name"`
		MediaType string `json:"media_type"`
		URL       string `json:"url"`
		Size      int64  `json:"size"`
		SHA256    string `json:"sha256"`
	} `json:"outputs"`
}

func (j jobJSON) terminal() bool {
	return j.State == "succeeded" || j.State == "failed" || j.State == "canceled"
}

func submitJSON(t *testing.T, c *client, key, renderer string, input []byte, options any, query string, hdr map[string]string) (*response, jobJSON) {
	t.Helper()
	fields := map[string]any{}
	if options != nil {
		fields["options"] = options
	}
	return submitFields(t, c, key, renderer, input, fields, query, hdr)
}

// submitFields submits a JSON job with fields beside its renderer and input.
func submitFields(t *testing.T, c *client, key, renderer string, input []byte, fields map[string]any, query string, hdr map[string]string) (*response, jobJSON) {
	t.Helper()
	body := map[string]any{"renderer": renderer, "input_base64": base64.StdEncoding.EncodeToString(input)}
	for k, v := range fields {
		body[k] = v
	}
	b, _ := json.Marshal(body)
	r := c.do("POST", "/v1/jobs"+query, key, "application/json", b, hdr)
	var j jobJSON
	if r.Status < 300 {
		r.json(t, &j)
	}
	return r, j
}

func getJob(t *testing.T, c *client, key, id, query string) jobJSON {
	t.Helper()
	r := c.do("GET", "/v1/jobs/"+id+query, key, "", nil, nil)
	if r.Status != 200 {
		t.Fatalf("GET job %s: %d %s", id, r.Status, r.Body)
	}
	var j jobJSON
	r.json(t, &j)
	return j
}

func TestJobsEndToEnd(t *testing.T) {
	s := newStack(t, stackOpts{apiArgs: []string{"-max-body-bytes", "2000000"}})
	c := s.client
	alice, bob := s.key("alice"), s.key("bob")

	t.Run("multipart with wait", func(t *testing.T) {
		ct, body := multipartBody(map[string]string{"renderer": "svg-png", "options": `{"width": 100}`}, samples.SVG(200, 100, 120, 20, 40))
		r := c.do("POST", "/v1/jobs?wait=30", alice, ct, body, nil)
		if r.Status != 200 {
			t.Fatalf("POST ?wait=30: %d %s", r.Status, r.Body)
		}
		var j jobJSON
		r.json(t, &j)
		if j.State != "succeeded" || len(j.Outputs) != 1 || j.Outputs[0].Name != "output.png" {
			t.Fatalf("job = %+v, want succeeded with output.png", j)
		}
		out := c.do("GET", j.Outputs[0].URL, alice, "", nil, nil)
		img, err := png.Decode(bytes.NewReader(out.Body))
		if err != nil || out.Header.Get("Content-Type") != "image/png" {
			t.Fatalf("output: %v, content type %q", err, out.Header.Get("Content-Type"))
		}
		if b := img.Bounds(); b.Dx() != 100 || b.Dy() != 50 {
			t.Errorf("output is %dx%d, want 100x50", b.Dx(), b.Dy())
		}
		if rr, gg, bb, _ := img.At(70, 20).RGBA(); rr < 0xe000 || gg > 0x2000 || bb > 0x2000 {
			t.Errorf("pixel (70,20) is not red")
		}
	})

	t.Run("json, then poll", func(t *testing.T) {
		r, j := submitJSON(t, c, alice, "pdf-png", samples.PDF("renderbox", 2), map[string]any{"dpi": 72}, "", nil)
		if r.Status != 202 || r.Header.Get("Location") != "/v1/jobs/"+j.ID || j.State != "queued" {
			t.Fatalf("POST: %d, Location %q, state %q", r.Status, r.Header.Get("Location"), j.State)
		}
		j = getJob(t, c, alice, j.ID, "?wait=30")
		if j.State != "succeeded" || len(j.Outputs) != 2 || j.Attempts != 1 || j.Options["dpi"] != float64(72) {
			t.Fatalf("job = %+v, want succeeded with 2 pages after 1 attempt at dpi 72", j)
		}
		for _, o := range j.Outputs {
			out := c.do("GET", o.URL, alice, "", nil, nil)
			cfg, _, err := image.DecodeConfig(bytes.NewReader(out.Body))
			if err != nil || cfg.Width != 612 || cfg.Height != 792 {
				t.Errorf("%s: %v %dx%d, want a 612x792 PNG", o.Name, err, cfg.Width, cfg.Height)
			}
		}
	})

	t.Run("idempotent resubmit", func(t *testing.T) {
		hdr := map[string]string{"Idempotency-Key": "order-1234"}
		in := samples.SVG(20, 20, 0, 0, 5)
		_, a := submitJSON(t, c, alice, "svg-png", in, nil, "", hdr)
		r, b := submitJSON(t, c, alice, "svg-png", in, nil, "", hdr)
		if r.Status != 200 && r.Status != 202 || a.ID == "" || a.ID != b.ID {
			t.Fatalf("resubmit: %d, ids %q and %q, want the same job", r.Status, a.ID, b.ID)
		}
		r, _ = submitJSON(t, c, alice, "svg-png", samples.SVG(30, 30, 0, 0, 5), nil, "", hdr)
		if r.Status != 422 || r.problemCode(t) != "idempotency_conflict" {
			t.Errorf("same key, other input: %d %s, want 422 idempotency_conflict", r.Status, r.Body)
		}
		// The record keeps no password, only a keyed digest of it: the
		// same password is the same job, another one a conflict.
		pdf, pw := samples.PDF("protected", 1), map[string]string{"Idempotency-Key": "protect-1"}
		_, p1 := submitJSON(t, c, alice, "pdf-protect", pdf, map[string]any{"user_password": "first pw"}, "", pw)
		r, p2 := submitJSON(t, c, alice, "pdf-protect", pdf, map[string]any{"user_password": "first pw"}, "", pw)
		if r.Status != 200 && r.Status != 202 || p1.ID == "" || p1.ID != p2.ID {
			t.Fatalf("resubmit with the same password: %d, ids %q and %q, want the same job", r.Status, p1.ID, p2.ID)
		}
		r, _ = submitJSON(t, c, alice, "pdf-protect", pdf, map[string]any{"user_password": "other pw"}, "", pw)
		if r.Status != 422 || r.problemCode(t) != "idempotency_conflict" || !strings.Contains(string(r.Body), "password or deliver") {
			t.Errorf("same key, other password: %d %s, want 422 idempotency_conflict naming password or deliver", r.Status, r.Body)
		}
		// Another tenant's identical key is another job.
		_, other := submitJSON(t, c, bob, "svg-png", in, nil, "", hdr)
		if other.ID == a.ID {
			t.Errorf("bob's Idempotency-Key returned alice's job")
		}
	})

	t.Run("auth and tenants", func(t *testing.T) {
		_, j := submitJSON(t, c, alice, "svg-png", samples.SVG(20, 20, 0, 0, 5), nil, "?wait=30", nil)
		for _, key := range []string{"", "rbx_nope", bob[:len(bob)-2] + "xx"} {
			if r := c.do("GET", "/v1/jobs/"+j.ID, key, "", nil, nil); r.Status != 401 || r.problemCode(t) != "unauthorized" {
				t.Errorf("key %q: %d, want 401 unauthorized", key, r.Status)
			}
		}
		for _, req := range [][2]string{{"GET", "/v1/jobs/" + j.ID}, {"DELETE", "/v1/jobs/" + j.ID}, {"GET", "/v1/jobs/" + j.ID + "/outputs/output.png"}} {
			if r := c.do(req[0], req[1], bob, "", nil, nil); r.Status != 404 {
				t.Errorf("bob %s %s: %d, want 404", req[0], req[1], r.Status)
			}
		}
		var list struct {
			Jobs []jobJSON `json:"jobs"`
		}
		c.do("GET", "/v1/jobs?limit=100", bob, "", nil, nil).json(t, &list)
		for _, bj := range list.Jobs {
			if bj.ID == j.ID {
				t.Errorf("bob's list shows alice's job")
			}
		}
	})

	t.Run("refused before any sandbox", func(t *testing.T) {
		for _, tc := range []struct {
			renderer string
			input    []byte
			options  any
			status   int
			code     string
		}{
			{"exe-shell", samples.PDF("a", 1), nil, 400, "unknown_renderer"},
			{"pdf-png", samples.PDF("a", 1), map[string]any{"zoomz": 2}, 400, "invalid_options"},
			{"pdf-png", samples.PDF("a", 1), map[string]any{"dpi": 100000}, 400, "invalid_options"},
			{"pdf-png", samples.HTML("a", "b"), nil, 400, "unsupported_input"},
			{"svg-png", bytes.Repeat([]byte("A"), 1_600_000), nil, 413, "input_too_large"},
		} {
			r, _ := submitJSON(t, c, alice, tc.renderer, tc.input, tc.options, "", nil)
			if r.Status != tc.status || r.problemCode(t) != tc.code {
				t.Errorf("%s: %d %s, want %d %s", tc.renderer, r.Status, tail(r.Body), tc.status, tc.code)
			}
		}
		ct, body := multipartBody(map[string]string{"renderer": "svg-png"}, bytes.Repeat([]byte("<svg>"), 500_000))
		if r := c.do("POST", "/v1/jobs", alice, ct, body, nil); r.Status != 413 || r.problemCode(t) != "input_too_large" {
			t.Errorf("2.5 MB multipart: %d %s, want 413", r.Status, tail(r.Body))
		}
		if r := c.do("POST", "/v1/jobs", alice, "text/plain", []byte("hi"), nil); r.Status != 415 || r.problemCode(t) != "unsupported_media_type" {
			t.Errorf("text/plain body: %d %s, want 415 unsupported_media_type", r.Status, tail(r.Body))
		}
	})

	t.Run("list with pagination", func(t *testing.T) {
		carol := s.key("carol")
		var ids []string
		for i := 0; i < 5; i++ {
			_, j := submitJSON(t, c, carol, "dot-svg", samples.DOT("a", fmt.Sprint(i)), nil, "", nil)
			ids = append(ids, j.ID)
		}
		seen := map[string]bool{}
		cursor, pages := "", 0
		for {
			q := "/v1/jobs?limit=2"
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			var page struct {
				Jobs []jobJSON `json:"jobs"`
				Next string    `json:"next_cursor"`
			}
			c.do("GET", q, carol, "", nil, nil).json(t, &page)
			pages++
			for _, j := range page.Jobs {
				if seen[j.ID] {
					t.Errorf("job %s listed twice", j.ID)
				}
				seen[j.ID] = true
			}
			if page.Next == "" {
				break
			}
			cursor = page.Next
		}
		if len(seen) != 5 || pages != 3 {
			t.Errorf("listed %d jobs in %d pages, want 5 in 3", len(seen), pages)
		}
		for _, id := range ids {
			getJob(t, c, carol, id, "?wait=30")
		}
		var done struct {
			Jobs []jobJSON `json:"jobs"`
		}
		c.do("GET", "/v1/jobs?state=succeeded&limit=100", carol, "", nil, nil).json(t, &done)
		if len(done.Jobs) != 5 {
			t.Errorf("state=succeeded lists %d jobs, want 5", len(done.Jobs))
		}
		if r := c.do("GET", "/v1/jobs?cursor=garbage", carol, "", nil, nil); r.Status != 400 {
			t.Errorf("bad cursor: %d, want 400", r.Status)
		}
	})

	t.Run("cancel queued and running", func(t *testing.T) {
		dave := s.key("dave")
		// Two pages that never finish loading fill both worker slots.
		spin := []byte(`<!DOCTYPE html><html><body><script>for(;;){}</script></body></html>`)
		var spinners []string
		for i := 0; i < 2; i++ {
			b, _ := json.Marshal(map[string]any{"renderer": "html-pdf", "input_base64": base64.StdEncoding.EncodeToString(spin),
				"options": map[string]any{"javascript": true}, "limits": map[string]any{"timeout_seconds": 40}})
			r := c.do("POST", "/v1/jobs", dave, "application/json", b, nil)
			var j jobJSON
			r.json(t, &j)
			spinners = append(spinners, j.ID)
		}
		waitFor(t, "both spinners to run", 60*time.Second, func() bool {
			return getJob(t, c, dave, spinners[0], "").State == "running" && getJob(t, c, dave, spinners[1], "").State == "running"
		})
		// "running" is reported before the sandbox is created; count both.
		waitFor(t, "both spinners' sandboxes", 30*time.Second, func() bool { return runscList(t, s.workerSB) == 2 })
		_, queued := submitJSON(t, c, dave, "svg-png", samples.SVG(20, 20, 0, 0, 5), nil, "", nil)
		time.Sleep(500 * time.Millisecond)
		if st := getJob(t, c, dave, queued.ID, "").State; st != "queued" {
			t.Fatalf("third job is %s, want queued behind the spinners", st)
		}
		r := c.do("DELETE", "/v1/jobs/"+queued.ID, dave, "", nil, nil)
		var cj jobJSON
		r.json(t, &cj)
		if r.Status != 200 || cj.State != "canceled" {
			t.Fatalf("cancel queued: %d %s", r.Status, r.Body)
		}
		// Cancel a running one: its sandbox is gone within a second.
		before := runscList(t, s.workerSB)
		t0 := time.Now()
		r = c.do("DELETE", "/v1/jobs/"+spinners[0], dave, "", nil, nil)
		if r.Status != 200 {
			t.Fatalf("cancel running: %d %s", r.Status, r.Body)
		}
		waitFor(t, "the canceled job's sandbox to go", 5*time.Second, func() bool { return runscList(t, s.workerSB) < before })
		if d := time.Since(t0); d > 1500*time.Millisecond {
			t.Errorf("the running job's sandbox went %v after the cancel, want within a second", d)
		}
		c.do("DELETE", "/v1/jobs/"+spinners[1], dave, "", nil, nil)
		// Give the queue time to hand the canceled job out if it would.
		time.Sleep(2 * time.Second)
		for _, id := range []string{queued.ID, spinners[0], spinners[1]} {
			j := getJob(t, c, dave, id, "")
			if j.State != "canceled" || j.Error == nil || j.Error.Code != "canceled" {
				t.Errorf("job %s = %s %+v, want canceled", id, j.State, j.Error)
			}
		}
		if j := getJob(t, c, dave, queued.ID, ""); j.Attempts != 0 || j.StartedAt != nil {
			t.Errorf("the canceled queued job ran: %d attempts", j.Attempts)
		}
		// DELETE is idempotent: a canceled job's cancel answers again.
		if r := c.do("DELETE", "/v1/jobs/"+queued.ID, dave, "", nil, nil); r.Status != 200 || !strings.Contains(string(r.Body), `"state":"canceled"`) {
			t.Errorf("canceling a canceled job: %d %s, want 200 and the canceled job", r.Status, tail(r.Body))
		}
	})

	t.Run("renderer failure is reported", func(t *testing.T) {
		// A PDF with a valid header and garbage after it.
		bad := append([]byte("%PDF-1.4\n"), bytes.Repeat([]byte{0xde, 0xad}, 100)...)
		_, j := submitJSON(t, c, alice, "pdf-png", bad, nil, "?wait=30", nil)
		if j.State != "failed" || j.Error == nil || j.Error.Code != "render_failed" {
			t.Fatalf("corrupt PDF: %+v, want failed render_failed", j)
		}
	})

	t.Run("health, readiness, metrics", func(t *testing.T) {
		for _, p := range []string{"/healthz", "/readyz", "/v1/renderers"} {
			if r := c.do("GET", p, "", "", nil, nil); r.Status != 200 {
				t.Errorf("%s: %d", p, r.Status)
			}
		}
		m := s.scrape()
		for _, want := range []string{"renderbox_jobs_accepted_total", "renderbox_jobs_finished_total", "renderbox_queue_depth", "renderbox_http_request_seconds"} {
			if !strings.Contains(m, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}

func TestSIGTERMMidJobEndsExactlyOnce(t *testing.T) {
	s := newStack(t, stackOpts{workerArgs: []string{"-shutdown-timeout", "1s"}})
	c := s.client
	key := s.key("erin")
	// The page waits 10 s, well past the worker's 1 s to drain.
	_, j := submitJSON(t, c, key, "html-pdf", samples.HTML("Interrupted", "then finished"), map[string]any{"wait_delay": 10}, "", nil)
	waitFor(t, "the job to run", 60*time.Second, func() bool { return getJob(t, c, key, j.ID, "").State == "running" })
	if err := s.worker.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.worker.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("worker exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop within 30s of SIGTERM")
	}
	if n := runscList(t, s.workerSB); n != 0 {
		t.Errorf("the stopped worker left %d sandboxes", n)
	}
	// Given back to the queue, it shows queued at once, not running
	// until another worker takes it.
	waitFor(t, "the requeued job to show queued", 3*time.Second, func() bool { return getJob(t, c, key, j.ID, "").State == "queued" })
	// A new worker picks the requeued job up and finishes it.
	s.startWorker("-shutdown-timeout", "1s")
	j = getJob(t, c, key, j.ID, "?wait=60")
	if j.State != "succeeded" {
		t.Fatalf("after restart the job is %s %+v, want succeeded", j.State, j.Error)
	}
	time.Sleep(time.Second)
	if again := getJob(t, c, key, j.ID, ""); again.State != "succeeded" || len(again.Outputs) != 1 {
		t.Errorf("the job changed after ending: %+v", again)
	}
}

func TestQueueBoundAndRateLimit(t *testing.T) {
	s := newStack(t, stackOpts{noWorker: true, apiArgs: []string{"-max-queue-depth", "2", "-rate", "0.2", "-burst", "3"}})
	c := s.client
	key := s.key("frank")
	in := samples.SVG(20, 20, 0, 0, 5)
	for i := 0; i < 2; i++ {
		if r, _ := submitJSON(t, c, key, "svg-png", in, nil, "", nil); r.Status != 202 {
			t.Fatalf("job %d: %d %s", i, r.Status, tail(r.Body))
		}
	}
	r, _ := submitJSON(t, c, key, "svg-png", in, nil, "", nil)
	if r.Status != 503 || r.problemCode(t) != "queue_full" || r.Header.Get("Retry-After") == "" {
		t.Errorf("third job with a queue bound of 2: %d %s (Retry-After %q), want 503 queue_full", r.Status, tail(r.Body), r.Header.Get("Retry-After"))
	}
	r, _ = submitJSON(t, c, key, "svg-png", in, nil, "", nil)
	if r.Status != 429 || r.problemCode(t) != "rate_limited" || r.Header.Get("Retry-After") == "" {
		t.Errorf("fourth job at burst 3: %d %s, want 429 rate_limited with Retry-After", r.Status, tail(r.Body))
	}
	// Another key has its own bucket.
	if r, _ := submitJSON(t, c, s.key("grace"), "svg-png", in, nil, "", nil); r.Status == 429 {
		t.Errorf("a second key was rate limited by the first key's submissions")
	}
	// Every accepted job is still queued, none lost.
	var list struct {
		Jobs []jobJSON `json:"jobs"`
	}
	c.do("GET", "/v1/jobs?state=queued", key, "", nil, nil).json(t, &list)
	if len(list.Jobs) != 2 {
		t.Errorf("%d queued jobs, want the 2 accepted", len(list.Jobs))
	}
}

func tail(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// runscWrapper is a runsc that runs the real one, but while marker exists
// runs the shell command then instead of each runsc command given arg.
func runscWrapper(t *testing.T, arg, marker, then string) string {
	t.Helper()
	wrapper := filepath.Join(t.TempDir(), "runsc")
	script := fmt.Sprintf(`#!/bin/sh
if [ "$1" = --version ]; then echo "runsc version release-20260905.0"; exit 0; fi
for a in "$@"; do
  if [ "$a" = %q ] && [ -e %q ]; then %s; fi
done
exec %q "$@"
`, arg, marker, then, testenv.Runsc(t))
	exe.Write(t, wrapper, script)
	return wrapper
}

func TestFailingRunscIsRetriedThenFails(t *testing.T) {
	// A runsc that works until told to fail every `start`: the worker
	// passes its checks, then each attempt is a sandbox_failure.
	marker := filepath.Join(t.TempDir(), "fail-start")
	wrapper := runscWrapper(t, "start", marker, `echo "runsc: simulated start failure" >&2; exit 128`)
	s := newStack(t, stackOpts{workerArgs: []string{"-runsc", wrapper}})
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c := s.client
	key := s.key("heidi")
	_, j := submitJSON(t, c, key, "svg-png", samples.SVG(20, 20, 0, 0, 5), nil, "?wait=60", nil)
	if j.State != "failed" || j.Error == nil || j.Error.Code != "sandbox_failure" {
		t.Fatalf("job = %s %+v, want failed sandbox_failure", j.State, j.Error)
	}
	if j.Attempts != 3 {
		t.Errorf("the job ran %d times, want 3 (two retries)", j.Attempts)
	}
	if !strings.Contains(j.Error.Message, "starting the sandbox") {
		t.Errorf("error message %q does not say what failed", j.Error.Message)
	}
	// Healthy again: the next job succeeds.
	os.Remove(marker)
	if _, j := submitJSON(t, c, key, "svg-png", samples.SVG(20, 20, 0, 0, 5), nil, "?wait=60", nil); j.State != "succeeded" {
		t.Errorf("after runsc recovered: %s %+v", j.State, j.Error)
	}
}

func TestKilledWorkersJobIsFinishedByItsSuccessor(t *testing.T) {
	t.Parallel() // mostly waiting (package doc)
	s := newStack(t, stackOpts{})
	c := s.client
	key := s.key("ivan")
	// wait_delay keeps the page in its sandbox past the kill: a cold
	// html-pdf on a quiet host ends in under a second (0.79 s measured).
	_, j := submitJSON(t, c, key, "html-pdf", samples.HTML("Crash", "mid-render"), map[string]any{"wait_delay": 5}, "", nil)
	waitFor(t, "the job to run", 60*time.Second, func() bool { return getJob(t, c, key, j.ID, "").State == "running" })
	waitFor(t, "its sandbox to exist", 30*time.Second, func() bool { return runscList(t, s.workerSB) >= 1 })
	time.Sleep(time.Second)                             // mid-render
	if err := s.worker.cmd.Process.Kill(); err != nil { // kill -9: no drain, no cleanup
		t.Fatal(err)
	}
	_ = s.worker.cmd.Wait()
	if n := runscList(t, s.workerSB); n < 1 {
		out, err := exec.Command(s.workerSB.Runsc, "--root="+filepath.Join(s.workerSB.StateDir, "runsc"), "list").CombinedOutput()
		t.Fatalf("no orphaned sandbox after kill -9 (runsc list: %d): %s %v; ps: %s", n, out, err, psRunsc())
	}
	// The successor reaps what its predecessor left, then asynq hands it
	// the job once the dead worker's lease expires.
	w := s.startWorker()
	if !strings.Contains(w.output(), `"check":"reap","verdict":"pass"`) || strings.Contains(w.output(), "0 leftover sandboxes deleted") {
		t.Errorf("the successor did not reap the orphaned sandbox:\n%s", tailStr(w.output(), 2000))
	}
	deadline := time.Now().Add(4 * time.Minute)
	for j.State != "succeeded" && j.State != "failed" && time.Now().Before(deadline) {
		j = getJob(t, c, key, j.ID, "?wait=60")
	}
	if j.State != "succeeded" || len(j.Outputs) != 1 {
		t.Fatalf("after the crash the job is %s %+v, want succeeded", j.State, j.Error)
	}
	if j.Attempts < 2 {
		t.Errorf("attempts = %d, want the crashed one and the successor's", j.Attempts)
	}
	time.Sleep(time.Second)
	if again := getJob(t, c, key, j.ID, ""); again.State != "succeeded" || again.Attempts != j.Attempts {
		t.Errorf("the job changed after ending: %+v", again)
	}
	t.Logf("finished by the successor after %d attempts", j.Attempts)
}

// A worker killed after it reported a job's result but before asynq heard
// (asynq's acknowledgement held on its way to Redis, ackHold) leaves the
// task active. Once its lease expires asynq hands the task to the
// successor, which finds the job ended and completes the task without
// running it again: the job keeps its one attempt and its output, and
// asynq holds no task.
func TestKilledBetweenResultAndAckIsNotRunAgain(t *testing.T) {
	t.Parallel() // mostly waiting: asynq's lease, then its recoverer's minute
	var hold *ackHold
	s := newStack(t, stackOpts{access: func(rs *testenv.RedisServer, _ string) map[string]redisAccess {
		hold = holdAck(t, rs.Addr)
		return map[string]redisAccess{"api": {args: []string{"-redis", rs.Addr}}, "worker": {args: []string{"-redis", hold.addr()}}}
	}})
	c, key := s.client, s.key("judy")
	_, j := submitJSON(t, c, key, "svg-png", samples.SVG(20, 20, 0, 0, 5), nil, "?wait=60", nil)
	if j.State != "succeeded" || j.Attempts != 1 || len(j.Outputs) != 1 {
		t.Fatalf("job %s, %d attempts, %d outputs %+v; want succeeded once", j.State, j.Attempts, len(j.Outputs), j.Error)
	}
	select {
	case <-hold.held:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out after 30s waiting for asynq's acknowledgement to be held:\n%s", tailStr(s.worker.output(), 2000))
	}
	if qi, err := asynqInfo(s.redisSrv); err != nil || qi.Active != 1 {
		t.Fatalf("asynq before the kill: %+v %v; want the job's task active", qi, err)
	}
	if err := s.worker.cmd.Process.Kill(); err != nil { // kill -9 in the window
		t.Fatal(err)
	}
	_ = s.worker.cmd.Wait()
	w := s.startWorker()
	tasksSettledIn(t, s.redisSrv)
	// The line is written before asynq hears the task is done, but it
	// reaches this process through a pipe: waited for, not read at once.
	var skipped struct {
		JobID string `json:"job_id"`
	}
	w.waitLog(t, "the job already ended on an earlier delivery of its task; not running it again", &skipped)
	if skipped.JobID != j.ID || strings.Contains(w.output(), `"msg":"job finished"`) {
		t.Errorf("the successor ran the ended job again, or said so of another (%q):\n%s", skipped.JobID, tailStr(w.output(), 3000))
	}
	if again := getJob(t, c, key, j.ID, ""); again.State != "succeeded" || again.Attempts != 1 || len(again.Outputs) != 1 {
		t.Errorf("the job after its task came back: %s, %d attempts, %d outputs; want it as it ended", again.State, again.Attempts, len(again.Outputs))
	}
	if qi, err := asynqInfo(s.redisSrv); err != nil || qi.Completed != 1 || qi.Archived != 0 {
		t.Errorf("asynq after: %+v %v; want the one task completed", qi, err)
	}
}

// ackHold is a TCP proxy between a worker and Redis that passes everything
// but the first command asynq sends to mark a task completed, which it
// keeps from Redis for good (and all the connection sends after it): the
// worker has reported the job's result by then, and waits for the
// command's answer. The command is told by two of its keys, the queue's
// completed set and its processed counter, which together no other
// command names (asynq's internal/rdb: MarkAsComplete). Only the first is
// held; the successor's pass.
type ackHold struct {
	ln   net.Listener
	on   atomic.Bool
	held chan struct{} // closed once the command is held
}

func holdAck(t *testing.T, redis string) *ackHold {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	h := &ackHold{ln: ln, held: make(chan struct{})}
	h.on.Store(true)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go h.serve(c, redis)
		}
	}()
	return h
}

func (h *ackHold) addr() string { return h.ln.Addr().String() }

func (h *ackHold) serve(c net.Conn, redis string) {
	defer c.Close()
	r, err := net.Dial("tcp", redis)
	if err != nil {
		return
	}
	defer r.Close()
	go func() { _, _ = io.Copy(c, r); c.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		// go-redis writes a command in one write, which one read takes.
		b := buf[:n]
		if bytes.Contains(b, []byte("}:completed")) && bytes.Contains(b, []byte("}:processed:")) && h.on.CompareAndSwap(true, false) {
			close(h.held)
			_, _ = io.Copy(io.Discard, c)
			return
		}
		if _, werr := r.Write(b); werr != nil || err != nil {
			return
		}
	}
}

func psRunsc() string {
	out, _ := exec.Command("sh", "-c", "ps -eo pid,ppid,args | grep -E 'runsc|renderbox-agent|chromium' | grep -v grep | cut -c1-150").Output()
	return string(out)
}
