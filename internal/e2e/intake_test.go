//go:build !unit

package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/samples"
)

// streamed is the answer to a body sent while the answer was read.
type streamed struct {
	*response
	written int64 // body bytes written before the answer came
}

// postStream POSTs size bytes of body to path over a raw connection,
// writing in 64 KiB pieces while it reads the response, so a server that
// refuses early is seen doing so: written says how much of the body had
// gone out when the answer arrived. The answer is checked against
// openapi.yaml. It is safe to call from several goroutines.
func (c *client) postStream(path, key, contentType string, size int64, body io.Reader) (*streamed, error) {
	u, err := url.Parse(c.base + path)
	if err != nil {
		return nil, err
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	req, _ := http.NewRequest("POST", c.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", contentType)
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		u.RequestURI(), u.Host, key, contentType, size)
	var written atomic.Int64
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := body.Read(buf)
			if n > 0 {
				if _, werr := conn.Write(buf[:n]); werr != nil {
					return
				}
				written.Add(int64(n))
			}
			if err != nil {
				return
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", path, err)
	}
	at := written.Load()
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	c.validate(req, nil, resp, data)
	return &streamed{&response{Status: resp.StatusCode, Header: resp.Header, Body: data}, at}, nil
}

// repeatReader is n copies of one byte.
type repeatReader struct {
	c byte
	n int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n)]
	for i := range p {
		p[i] = r.c
	}
	r.n -= int64(len(p))
	return len(p), nil
}

// body is prefix, n copies of c, then suffix, as a reader and its size.
func body(prefix string, c byte, n int64, suffix string) (io.Reader, int64) {
	return io.MultiReader(strings.NewReader(prefix), &repeatReader{c, n}, strings.NewReader(suffix)), int64(len(prefix)) + n + int64(len(suffix))
}

// memoryWatch reports how far a process's peak resident memory (VmHWM)
// rose over its resident memory when the watch began.
type memoryWatch struct {
	t    *testing.T
	pid  int
	base int64
}

func watchMemory(t *testing.T, pid int) *memoryWatch {
	base, err := procStatusBytes(pid, "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	return &memoryWatch{t, pid, base}
}

func (m *memoryWatch) growth() int64 {
	peak, err := procStatusBytes(m.pid, "VmHWM")
	if err != nil {
		m.t.Fatal(err)
	}
	return peak - m.base
}

const maxIntakeGrowth = 64 << 20

// Issue 10: a 60 MiB JSON submission peaked at 245 MB in the API (body,
// base64 and decoded copies held at once, the renderer's limit checked
// after the whole body was read), four in parallel at 664 MB. The input is
// decoded as it streams in and refused at the renderer's limit.
func TestJSONIntakeIsAStream(t *testing.T) {
	s := newStack(t, stackOpts{noWorker: true})
	key := s.key("stream")
	mem := watchMemory(t, s.api.cmd.Process.Pid)
	send := func() (*streamed, error) {
		r, n := body(`{"renderer": "dot-svg", "input_base64": "`, 'A', 60<<20, `"}`)
		return s.client.postStream("/v1/jobs", key, "application/json", n, r)
	}
	check := func(what string, r *streamed, err error) {
		if err != nil {
			t.Errorf("%s: %v", what, err)
			return
		}
		if r.Status != 413 || r.problemCode(t) != "input_too_large" || r.written > 16<<20 {
			t.Errorf("%s: %d %s after %d bytes of 60 MiB, want 413 input_too_large within the first 16 MiB", what, r.Status, tail(r.Body), r.written)
		}
	}
	r, err := send()
	check("a 60 MiB JSON body for dot-svg", r, err)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := send()
			check(fmt.Sprintf("parallel 60 MiB JSON body %d", i), r, err)
		}()
	}
	wg.Wait()
	if g := mem.growth(); g > maxIntakeGrowth {
		t.Errorf("the API's peak memory grew by %d MB over five 60 MiB submissions, want under 64 MB", g>>20)
	} else {
		t.Logf("the API's peak memory grew by %.1f MB over five 60 MiB submissions", float64(g)/(1<<20))
	}

	// The body bound is the renderer's too: 10 MiB of whitespace around a
	// small dot-svg input is over it (the old bound was 64 MiB for all).
	in := base64.StdEncoding.EncodeToString(samples.DOT("a", "b"))
	rd, n := body(`{"renderer": "dot-svg", "input_base64": "`+in+`",`, ' ', 10<<20, `"options": {}}`)
	if r, err := s.client.postStream("/v1/jobs", key, "application/json", n, rd); err != nil || r.Status != 413 || r.problemCode(t) != "input_too_large" {
		t.Errorf("dot-svg with 10 MiB of whitespace: %v %+v, want 413 input_too_large", err, r)
	}
	// Named after its input, a renderer's limit applies as soon as it is
	// known.
	rd, n = body(`{"input_base64": "`, 'A', 4<<20, `", "renderer": "dot-svg"}`)
	if r, err := s.client.postStream("/v1/jobs", key, "application/json", n, rd); err != nil || r.Status != 413 || r.problemCode(t) != "input_too_large" {
		t.Errorf("3 MiB of input, then renderer dot-svg: %v %+v, want 413 input_too_large", err, r)
	}
	for _, tc := range []struct{ name, body, code string }{
		{"a repeated field", `{"renderer":"dot-svg","renderer":"dot-png","input_base64":""}`, "invalid_request"},
		{"an unknown field", `{"renderer":"dot-svg","input_base64":"","x":1}`, "invalid_request"},
		{"trailing data", `{"renderer":"dot-svg","input_base64":"YQ=="} {}`, "invalid_request"},
		{"bad base64", `{"renderer":"dot-svg","input_base64":"!!!!"}`, "invalid_request"},
		{"an escaped slash in base64", `{"renderer":"dot-svg","input_base64":"` + strings.ReplaceAll(base64.StdEncoding.EncodeToString(samples.DOT("a?", "b")), "/", `\/`) + `"}`, ""},
	} {
		r := s.client.do("POST", "/v1/jobs", key, "application/json", []byte(tc.body), nil)
		if tc.code == "" && r.Status != 202 || tc.code != "" && (r.Status != 400 || r.problemCode(t) != tc.code) {
			t.Errorf("%s: %d %s, want %s", tc.name, r.Status, tail(r.Body), map[bool]string{true: "202", false: "400 " + tc.code}[tc.code == ""])
		}
	}
}

// Multipart: the renderer's input limit applies as the file part arrives;
// the small fields are capped at 8 KiB (docs/security.md, "Request intake
// bounds").
func TestMultipartIntakeBounds(t *testing.T) {
	s := newStack(t, stackOpts{noWorker: true})
	key := s.key("multipart")
	const boundary = "renderbox-test-boundary"
	ct := "multipart/form-data; boundary=" + boundary
	part := func(name, value string) string {
		return "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + name + "\"\r\n\r\n" + value + "\r\n"
	}
	fileHead := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"in\"\r\nContent-Type: application/octet-stream\r\n\r\n"
	end := "\r\n--" + boundary + "--\r\n"
	mem := watchMemory(t, s.api.cmd.Process.Pid)

	rd, n := body(part("renderer", "dot-svg")+fileHead, 'a', 60<<20, end)
	r, err := s.client.postStream("/v1/jobs", key, ct, n, rd)
	if err != nil || r.Status != 413 || r.problemCode(t) != "input_too_large" || r.written > 16<<20 {
		t.Errorf("renderer dot-svg, then a 60 MiB file: %v %+v, want 413 input_too_large within the first 16 MiB", err, r)
	}
	rd, n = body(fileHead, 'a', 3<<20, "\r\n"+part("renderer", "dot-svg")+"--"+boundary+"--\r\n")
	if r, err := s.client.postStream("/v1/jobs", key, ct, n, rd); err != nil || r.Status != 413 || r.problemCode(t) != "input_too_large" {
		t.Errorf("a 3 MiB file, then renderer dot-svg: %v %+v, want 413 input_too_large", err, r)
	}

	// 40 MB of options stays under the multipart body bound (50 MiB +
	// 96 KiB, refused by Content-Length before a byte is read), so it is the
	// 8 KiB field cap that must stop it, and early.
	rd, n = body(part("renderer", "svg-png")+part("options", string(samples.UnknownOptions(40<<20, `"width":1`)))+fileHead, 'a', 10, end)
	start := time.Now()
	r, err = s.client.postStream("/v1/jobs", key, ct, n, rd)
	if took := time.Since(start); err != nil || r.Status != 413 || r.problemCode(t) != "field_too_large" || len(r.Body) > 1024 || took > 5*time.Second || r.written > 16<<20 {
		t.Errorf("a 40 MB options part: %v %+v after %v, want a short 413 field_too_large within 5 s and the first 16 MiB", err, r, took)
	}
	rd, n = body(part("renderer", "svg-png")+part("options", string(samples.UnknownOptions(51<<20, `"width":1`)))+fileHead, 'a', 10, end)
	if r, err := s.client.postStream("/v1/jobs", key, ct, n, rd); err != nil || r.Status != 413 || r.problemCode(t) != "input_too_large" || r.written > 16<<20 {
		t.Errorf("a 51 MB options part: %v %+v, want 413 input_too_large by its Content-Length", err, r)
	}
	if g := mem.growth(); g > maxIntakeGrowth {
		t.Errorf("the API's peak memory grew by %d MB, want under 64 MB", g>>20)
	} else {
		t.Logf("the API's peak memory grew by %.1f MB", float64(g)/(1<<20))
	}

	dot := string(samples.DOT("a", "b"))
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"a 9 KiB callback_url", part("renderer", "dot-svg") + part("callback_url", "https://example.com/"+strings.Repeat("a", 9<<10)) + fileHead + dot + end, 413, "field_too_large"},
		{"a 9 KiB limits part", part("renderer", "dot-svg") + part("limits", `{"timeout_seconds":5`+strings.Repeat(" ", 9<<10)+"}") + fileHead + dot + end, 413, "field_too_large"},
		{"two renderer parts", part("renderer", "dot-svg") + part("renderer", "dot-png") + fileHead + dot + end, 400, "invalid_request"},
		{"two file parts", part("renderer", "dot-svg") + fileHead + dot + "\r\n" + fileHead + dot + end, 400, "invalid_request"},
		{"an unknown part", part("renderer", "dot-svg") + part("x", "y") + fileHead + dot + end, 400, "invalid_request"},
		{"an unknown renderer", part("renderer", "nope") + fileHead + dot + end, 400, "unknown_renderer"},
		{"renderer last", fileHead + dot + "\r\n" + part("renderer", "dot-svg") + "--" + boundary + "--\r\n", 202, ""},
	} {
		r := s.client.do("POST", "/v1/jobs", key, ct, []byte(tc.body), nil)
		if r.Status != tc.status || tc.code != "" && r.problemCode(t) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.Status, tail(r.Body), tc.status, tc.code)
		}
	}
}

// Issue 10: a 48 MB ZIP of 900 k entries sent to office-pdf peaked at
// 335 MB while archive/zip read its directory to sniff the type. The end
// record is read first; the directory is never parsed.
func TestZipDirectoryRefusedAtTheDoor(t *testing.T) {
	s := newStack(t, stackOpts{noWorker: true})
	key := s.key("zip")
	zip := samples.ZipDirectory(900_000, 900_000)
	ct, b := multipartBody(map[string]string{"renderer": "office-pdf"}, zip)
	mem := watchMemory(t, s.api.cmd.Process.Pid)
	start := time.Now()
	r := s.client.do("POST", "/v1/jobs", key, ct, b, nil)
	took := time.Since(start)
	if r.Status != 413 || r.problemCode(t) != "input_too_large" || !strings.Contains(string(r.Body), "900000 entries") {
		t.Errorf("a %d-byte ZIP of 900000 entries: %d %s, want 413 input_too_large naming the count", len(zip), r.Status, tail(r.Body))
	}
	g := mem.growth()
	if g > maxIntakeGrowth {
		t.Errorf("the API's peak memory grew by %d MB for a %d MB ZIP, want under 64 MB", g>>20, len(zip)>>20)
	}
	t.Logf("a %.1f MB ZIP of 900000 entries: refused in %v, peak memory +%.1f MB", float64(len(zip))/(1<<20), took, float64(g)/(1<<20))
}

// Issue 10: a 90-byte DOT job whose `limits` repeated one key 1 M times
// stored a 20 MB task in Redis, because the client's text was queued as
// it came. The task carries the validated limits; the repeated object is
// refused; and a timeout under a millisecond is refused rather than
// rounded to the renderer's default.
func TestQueuedTaskCarriesValidatedLimits(t *testing.T) {
	s := newStack(t, stackOpts{noWorker: true})
	key := s.key("limits")
	submit := func(limits string) *response {
		body := `{"renderer":"dot-svg","input_base64":"` + base64.StdEncoding.EncodeToString(samples.DOT("a", "b")) + `","limits":` + limits + `}`
		return s.client.do("POST", "/v1/jobs", key, "application/json", []byte(body), nil)
	}

	padded := `{"timeout_seconds":` + strings.Repeat(" ", 6000) + `5}`
	r := submit(padded)
	if r.Status != 202 {
		t.Fatalf("a padded limits object: %d %s, want 202", r.Status, tail(r.Body))
	}
	var j jobJSON
	r.json(t, &j)
	rdb := redis.NewClient(&redis.Options{Addr: s.redis})
	defer rdb.Close()
	// The dispatcher moves the job into asynq after the 202, in its own
	// time (a busy host has been seen to take longer than the test's
	// next step).
	var msg []byte
	var err error
	waitFor(t, "the job to reach asynq", 20*time.Second, func() bool {
		msg, err = rdb.HGet(context.Background(), "asynq:{default}:t:"+j.ID, "msg").Bytes()
		return err == nil
	})
	if len(msg) > 1024 || !strings.Contains(string(msg), `"limits":{"timeout_seconds":5}`) {
		t.Errorf("the queued task is %d bytes (%.300q), want under 1 KiB with limits {\"timeout_seconds\":5}", len(msg), msg)
	}

	repeated := "{" + strings.Repeat(`"timeout_seconds":5,`, 1_000_000) + `"timeout_seconds":5}`
	for _, tc := range []struct {
		name, limits string
		status       int
		code         string
	}{
		{"one key repeated 1 M times", repeated, 413, "field_too_large"},
		{"one key twice", `{"timeout_seconds":5,"timeout_seconds":5}`, 400, "invalid_options"},
		{"timeout_seconds 1e-10", `{"timeout_seconds":1e-10}`, 400, "invalid_options"},
		{"timeout_seconds 0", `{"timeout_seconds":0}`, 400, "invalid_options"},
	} {
		if r := submit(tc.limits); r.Status != tc.status || r.problemCode(t) != tc.code || len(r.Body) > 1024 {
			t.Errorf("%s: %d %s, want a short %d %s", tc.name, r.Status, tail(r.Body), tc.status, tc.code)
		}
	}
	if n, err := rdb.LLen(context.Background(), "asynq:{default}:pending").Result(); err != nil || n != 1 {
		t.Errorf("pending tasks: %d (%v), want only the one accepted", n, err)
	}
}

// Issue 10: a 600 KB Idempotency-Key was stored, and a replay with other
// options or limits silently returned the first job.
func TestIdempotencyKeyBoundsAndConflicts(t *testing.T) {
	s := newStack(t, stackOpts{noWorker: true})
	key := s.key("idem")
	in := samples.DOT("a", "b")
	submit := func(idem string, renderer string, input []byte, extra string) *response {
		b := `{"renderer":"` + renderer + `","input_base64":"` + base64.StdEncoding.EncodeToString(input) + `"` + extra + `}`
		return s.client.do("POST", "/v1/jobs", key, "application/json", []byte(b), map[string]string{"Idempotency-Key": idem})
	}
	for _, idem := range []string{strings.Repeat("k", 256), strings.Repeat("k", 600<<10), "tab\there"} {
		if r := submit(idem, "dot-svg", in, ""); r.Status != 400 || r.problemCode(t) != "invalid_idempotency_key" || len(r.Body) > 1024 {
			t.Errorf("a %d-byte Idempotency-Key: %d %s, want a short 400 invalid_idempotency_key", len(idem), r.Status, tail(r.Body))
		}
	}
	idem := strings.Repeat("k", 255)
	first := `,"options":{"layout":"neato"},"limits":{"timeout_seconds":5},"callback_url":"https://hooks.example.com/a","output_name":"report"`
	r := submit(idem, "dot-svg", in, first)
	if r.Status != 202 {
		t.Fatalf("a 255-character Idempotency-Key: %d %s, want 202", r.Status, tail(r.Body))
	}
	var a jobJSON
	r.json(t, &a)
	// The same request spelled differently is the same request.
	same := `,"output_name":"report","limits":{"timeout_seconds":5.0},"options":{ "layout" : "neato" },"callback_url":"https://hooks.example.com/a"`
	if r := submit(idem, "dot-svg", in, same); r.Status != 200 && r.Status != 202 || !strings.Contains(string(r.Body), a.ID) {
		t.Errorf("an identical replay: %d %s, want the first job %s", r.Status, tail(r.Body), a.ID)
	}
	for _, tc := range []struct {
		what, renderer string
		input          []byte
		extra          string
	}{
		{"renderer", "dot-png", in, first},
		{"options", "dot-svg", in, strings.Replace(first, "neato", "circo", 1)},
		{"limits", "dot-svg", in, strings.Replace(first, `"timeout_seconds":5`, `"timeout_seconds":4`, 1)},
		{"limits", "dot-svg", in, strings.Replace(first, `,"limits":{"timeout_seconds":5}`, "", 1)},
		{"input", "dot-svg", samples.DOT("a", "c"), first},
		{"callback_url", "dot-svg", in, strings.Replace(first, "/a", "/b", 1)},
		{"output_name", "dot-svg", in, strings.Replace(first, `"report"`, `"summary"`, 1)},
		{"output_name", "dot-svg", in, strings.Replace(first, `,"output_name":"report"`, "", 1)},
	} {
		if r := submit(idem, tc.renderer, tc.input, tc.extra); r.Status != 422 || r.problemCode(t) != "idempotency_conflict" || !strings.Contains(string(r.Body), tc.what) {
			t.Errorf("a replay with other %s: %d %s, want 422 idempotency_conflict naming it", tc.what, r.Status, tail(r.Body))
		}
	}
}
