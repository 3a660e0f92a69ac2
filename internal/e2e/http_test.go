//go:build !unit

package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/samples"
)

// maxGrowth is what an attack may add to the API's memory.
const maxGrowth = 64 << 20

// A made-up HTTP method is a label value the client chooses: each one used
// to add a histogram series that lived as long as the process (100 methods
// of 900 KB held ≈ 163 MB). Methods now come from a fixed set and routes
// are patterns, so no request adds a series of its own.
func TestMetricsLabelsAreBounded(t *testing.T) {
	s := newStack(t, stackOpts{noWorker: true})
	key := s.key("mallory")
	methods := map[string]bool{}
	grew := s.apiMemoryGrowth(func() {
		for i := range 100 {
			m := fmt.Sprintf("M%03d%s", i, strings.Repeat("X", 900_000))
			methods[m[:8]] = true
			req, _ := http.NewRequest(m, s.base+"/healthz", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("made-up method %d: %v", i, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Fatalf("made-up method %d: %d, want 405", i, resp.StatusCode)
			}
		}
	})
	// Raw paths, too, must not become labels.
	for i := range 20 {
		s.client.do("GET", fmt.Sprintf("/v1/jobs/job_made_up_%d", i), key, "", nil, nil)
		resp, err := http.Get(fmt.Sprintf("%s/no/such/route_%d", s.base, i))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	m := s.scrape()
	if len(m) > 256<<10 {
		t.Errorf("/metrics is %d bytes after the made-up methods, want a few KB", len(m))
	}
	allowed := map[string]bool{"GET": true, "POST": true, "PUT": true, "DELETE": true, "HEAD": true, "OPTIONS": true, "PATCH": true, "other": true}
	series := 0
	for _, line := range strings.Split(m, "\n") {
		if !strings.HasPrefix(line, "renderbox_http_request_seconds_count{") {
			continue
		}
		series++
		method := regexp.MustCompile(`method="([^"]*)"`).FindStringSubmatch(line)
		route := regexp.MustCompile(`route="([^"]*)"`).FindStringSubmatch(line)
		if method == nil || !allowed[method[1]] {
			t.Errorf("series %s: the method label is not one of the fixed set", tailStr(line, 200))
		}
		if route == nil || strings.Contains(route[1], "made_up") || strings.Contains(route[1], "route_") {
			t.Errorf("series %s: the route label is a raw path, want a pattern", tailStr(line, 200))
		}
	}
	// readyz, the two routes and their statuses, unmatched, other: a handful.
	if series > 10 {
		t.Errorf("%d request series after 100 made-up methods and 40 made-up paths, want a handful:\n%s", series, tailStr(m, 3000))
	}
	t.Logf("100 made-up methods of 900 KB: API peak memory grew %s, /metrics is %d bytes with %d request series", mib(grew), len(m), series)
	if grew > maxGrowth {
		t.Errorf("the API's memory grew %s during the made-up methods, want < %s", mib(grew), mib(maxGrowth))
	}
}

// /metrics shows every tenant's job counts: it is served on a listener of
// its own, never on the API's.
func TestMetricsOnlyOnTheirOwnListener(t *testing.T) {
	s := newStack(t, stackOpts{noWorker: true})
	resp, err := http.Get(s.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "renderbox_") {
		t.Errorf("GET /metrics on the API's address: %d %s, want 404 without metrics", resp.StatusCode, tail(body))
	}
	if m := s.scrape(); !strings.Contains(m, "renderbox_http_request_seconds") {
		t.Errorf("the metrics listener serves no request metrics:\n%s", tailStr(m, 2000))
	}
}

// An idle keep-alive connection is closed after -idle-timeout.
func TestIdleConnectionIsClosed(t *testing.T) {
	s := newStack(t, stackOpts{noWorker: true, apiArgs: []string{"-idle-timeout", "2s"}})
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	t0 := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = br.ReadByte()
	if d := time.Since(t0); err != io.EOF || d > 4*time.Second {
		t.Errorf("an idle keep-alive connection: %v after %v, want closed (EOF) within 2s + margin", err, d.Round(time.Millisecond))
	}
}

// A body trickled a byte a second is cut off once it falls behind the
// minimum rate after its grace, with 408; a large body sent at a fair rate
// is read to the end however long it takes.
func TestSlowBodyIsCutOff(t *testing.T) {
	s := newStack(t, stackOpts{noWorker: true, apiArgs: []string{"-body-timeout", "2s", "-min-rate", "2000"}})
	key := s.key("sloth")

	t.Run("trickle", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n", key)
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Second):
				}
				// Whitespace: valid JSON so far, so the body is read on.
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
		t0 := time.Now()
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		d := time.Since(t0)
		if err != nil {
			t.Fatalf("the trickled POST: no answer after %v: %v", d.Round(time.Millisecond), err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code := ""
		if m := regexp.MustCompile(`"code":"([^"]*)"`).FindSubmatch(body); m != nil {
			code = string(m[1])
		}
		if resp.StatusCode != http.StatusRequestTimeout || code != "request_timeout" || d > 6*time.Second {
			t.Errorf("a POST sending a byte a second: %d %s after %v, want 408 request_timeout within 2s + margin", resp.StatusCode, tail(body), d.Round(time.Millisecond))
		}
	})

	t.Run("fair rate", func(t *testing.T) {
		// 24 KB at about 6 KB/s: four seconds, twice the grace, yet always
		// ahead of 2000 bytes/s.
		in := append(samples.Markdown("Slow but fair"), bytes.Repeat([]byte("lorem ipsum "), 1500)...)
		body := fmt.Sprintf(`{"renderer":"markdown-html","input_base64":%q}`, base64.StdEncoding.EncodeToString(in))
		pr, pw := io.Pipe()
		go func() {
			for b := []byte(body); len(b) > 0; {
				n := min(len(b), 600)
				if _, err := pw.Write(b[:n]); err != nil {
					return
				}
				b = b[n:]
				time.Sleep(100 * time.Millisecond)
			}
			pw.Close()
		}()
		req, _ := http.NewRequest("POST", s.base+"/v1/jobs", pr)
		req.ContentLength = int64(len(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Errorf("a %d-byte body sent over %v at a fair rate: %d %s, want 202", len(body), time.Since(t0).Round(time.Millisecond), resp.StatusCode, tail(got))
		}
	})
}

// -max-in-flight and -max-in-flight-per-key bound the requests being
// served: past them, 429 too_many_requests with Retry-After, while other
// keys (under the global cap) and the health probes go on.
func TestRequestsInFlightAreCapped(t *testing.T) {
	t.Parallel() // mostly held ?wait= requests (package doc)
	s := newStack(t, stackOpts{noWorker: true, apiArgs: []string{"-max-in-flight", "4", "-max-in-flight-per-key", "2"}})
	c := s.client
	alice, bob, carol := s.key("alice"), s.key("bob"), s.key("carol")
	hold := func(key, id string, wg *sync.WaitGroup) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The worker is absent: the job stays queued and the call
			// holds its place for the whole wait. It is retried while the
			// test's own probing takes the place.
			for {
				r, err := c.try(nil, "GET", "/v1/jobs/"+id+"?wait=12", key, "", nil, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if r.Status == 429 {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				if r.Status != 200 {
					t.Errorf("a held request: %d %s", r.Status, tail(r.Body))
				}
				return
			}
		}()
	}
	refused := func(r *response) bool {
		return r.Status == 429 && r.problemCode(t) == "too_many_requests" && r.Header.Get("Retry-After") != ""
	}
	aliceJob := submitOK(t, c, alice, "dot-svg", samples.DOT("a"))
	bobJob := submitOK(t, c, bob, "dot-svg", samples.DOT("b"))
	var wg sync.WaitGroup
	hold(alice, aliceJob, &wg)
	hold(alice, aliceJob, &wg)
	waitFor(t, "alice's third request to be refused", 5*time.Second, func() bool {
		return refused(c.do("GET", "/v1/jobs/"+aliceJob, alice, "", nil, nil))
	})
	if r := c.do("GET", "/v1/jobs/"+bobJob, bob, "", nil, nil); r.Status != 200 {
		t.Errorf("bob, with nothing in flight, while alice is at her cap: %d %s, want 200", r.Status, tail(r.Body))
	}
	hold(bob, bobJob, &wg)
	hold(bob, bobJob, &wg)
	waitFor(t, "the server to be at its cap", 5*time.Second, func() bool {
		return refused(c.do("GET", "/v1/jobs", carol, "", nil, nil))
	})
	if r := c.do("GET", "/v1/renderers", "", "", nil, nil); !refused(r) {
		t.Errorf("an unauthenticated call at the global cap: %d %s, want 429 too_many_requests", r.Status, tail(r.Body))
	}
	// This stack has no worker: /readyz says so with 503, not 429.
	for p, want := range map[string]int{"/healthz": 200, "/readyz": 503} {
		if r := c.do("GET", p, "", "", nil, nil); r.Status != want {
			t.Errorf("%s at the cap: %d %s, want %d (probes are not counted)", p, r.Status, tail(r.Body), want)
		}
	}
	wg.Wait()
	if r := c.do("GET", "/v1/jobs", carol, "", nil, nil); r.Status != 200 {
		t.Errorf("once the held requests ended: %d %s, want 200", r.Status, tail(r.Body))
	}
}

// An output is streamed from Redis a chunk at a time and answers Range:
// eight slow readers of one 60 MiB output used to hold ≈ 500 MB (every
// download loaded the whole blob).
func TestOutputsAreStreamedWithRange(t *testing.T) {
	s := newStack(t, stackOpts{noWorker: true})
	c := s.client
	key := s.key("reader")
	id := submitOK(t, c, key, "dot-svg", samples.DOT("big"))

	// The output is written the way a worker writes it: a blob in Redis
	// and a succeeded event the API applies to the ledger.
	const size = 60 << 20
	data := make([]byte, size)
	rng := rand.NewChaCha8([32]byte{1})
	_, _ = rng.Read(data)
	sum := sha256.Sum256(data)
	forgeOutputs(t, s, id, forged{"output.svg", "image/svg+xml", data})
	j := waitEnded(t, c, key, id, 10*time.Second)
	if j.State != "succeeded" || len(j.Outputs) != 1 {
		t.Fatalf("the job is %s with %d outputs, want succeeded with one", j.State, len(j.Outputs))
	}
	url := j.Outputs[0].URL
	etag := `"` + hex.EncodeToString(sum[:]) + `"`

	t.Run("range", func(t *testing.T) {
		r := c.do("GET", url, key, "", nil, map[string]string{"Range": "bytes=1000-1999"})
		if r.Status != 206 || !bytes.Equal(r.Body, data[1000:2000]) || r.Header.Get("Content-Range") != fmt.Sprintf("bytes 1000-1999/%d", size) {
			t.Errorf("Range bytes=1000-1999: %d, Content-Range %q, %d bytes (equal: %v), want 206 and those bytes",
				r.Status, r.Header.Get("Content-Range"), len(r.Body), bytes.Equal(r.Body, data[1000:2000]))
		}
		if r.Header.Get("ETag") != etag || r.Header.Get("Content-Type") != "image/svg+xml" {
			t.Errorf("206 with ETag %q and Content-Type %q, want %s and image/svg+xml", r.Header.Get("ETag"), r.Header.Get("Content-Type"), etag)
		}
		r = c.do("GET", url, key, "", nil, map[string]string{"Range": "bytes=-10"})
		if r.Status != 206 || !bytes.Equal(r.Body, data[size-10:]) {
			t.Errorf("Range bytes=-10: %d, %d bytes, want 206 and the last ten", r.Status, len(r.Body))
		}
		r = c.do("GET", url, key, "", nil, map[string]string{"Range": fmt.Sprintf("bytes=%d-", size+5)})
		if r.Status != 416 || r.problemCode(t) != "range_not_satisfiable" || r.Header.Get("Content-Range") != fmt.Sprintf("bytes */%d", size) {
			t.Errorf("a range past the end: %d %s (Content-Range %q), want 416 range_not_satisfiable", r.Status, tail(r.Body), r.Header.Get("Content-Range"))
		}
		r = c.do("HEAD", url, key, "", nil, nil)
		if r.Status != 200 || r.Header.Get("Content-Length") != fmt.Sprint(size) || r.Header.Get("ETag") != etag || len(r.Body) != 0 {
			t.Errorf("HEAD: %d, Content-Length %q, ETag %q, %d bytes of body; want 200, %d, %s and none", r.Status, r.Header.Get("Content-Length"), r.Header.Get("ETag"), len(r.Body), size, etag)
		}
		r = c.do("GET", url, key, "", nil, map[string]string{"If-None-Match": etag})
		if r.Status != 304 {
			t.Errorf("If-None-Match with the ETag: %d, want 304", r.Status)
		}
	})

	t.Run("eight slow readers", func(t *testing.T) {
		var wg sync.WaitGroup
		grew := s.apiMemoryGrowth(func() {
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := slowDownload(s.base+url, key, size, sum); err != nil {
						t.Errorf("reader %d: %v", i, err)
					}
				}()
			}
			wg.Wait()
		})
		t.Logf("eight slow readers of a 60 MiB output: API peak memory grew %s", mib(grew))
		if grew > maxGrowth {
			t.Errorf("the API's memory grew %s during eight downloads of a 60 MiB output, want < %s", mib(grew), mib(maxGrowth))
		}
	})
}

// slowDownload reads url at about 20 MiB/s and checks its length and digest.
func slowDownload(url, key string, size int64, sum [32]byte) error {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != size {
		return fmt.Errorf("%d with Content-Length %d, want 200 and %d", resp.StatusCode, resp.ContentLength, size)
	}
	h := sha256.New()
	buf := make([]byte, 64<<10)
	var n int64
	for {
		k, err := io.ReadFull(resp.Body, buf)
		h.Write(buf[:k])
		n += int64(k)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return fmt.Errorf("after %d bytes: %w", n, err)
		}
		time.Sleep(3 * time.Millisecond)
	}
	if n != size || !bytes.Equal(h.Sum(nil), sum[:]) {
		return fmt.Errorf("got %d bytes with another digest, want %d", n, size)
	}
	return nil
}
