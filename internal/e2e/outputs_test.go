//go:build !unit

package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/jobstate"
)

// outputNames lists a job's output names in order.
func outputNames(j jobJSON) []string {
	var names []string
	for _, o := range j.Outputs {
		names = append(names, o.Name)
	}
	return names
}

// downloadAll downloads every output of j by its URL and checks it
// against the digest and size the record lists.
func downloadAll(t *testing.T, c *client, key string, j jobJSON) map[string][]byte {
	t.Helper()
	got := map[string][]byte{}
	for _, o := range j.Outputs {
		r := c.do("GET", o.URL, key, "", nil, nil)
		sum := sha256.Sum256(r.Body)
		if r.Status != 200 || hex.EncodeToString(sum[:]) != o.SHA256 || int64(len(r.Body)) != o.Size {
			t.Fatalf("GET %s: %d, %d bytes, want 200 with the %d bytes of sha256 %s", o.URL, r.Status, len(r.Body), o.Size, o.SHA256)
		}
		got[o.Name] = r.Body
	}
	return got
}

// output_name renames a job's outputs: name.ext for a renderer that makes
// one file, name-N.ext for pdf-png's pages. The record lists the new
// names, downloads answer to them, and the renderer's names are 404.
func TestOutputName(t *testing.T) {
	s := newStack(t, stackOpts{})
	c := s.client
	key := s.key("named")

	ct, body := multipartBody(map[string]string{"renderer": "dot-svg", "output_name": "diagram"}, samples.DOT("a", "b"))
	r := c.do("POST", "/v1/jobs?wait=60", key, ct, body, nil)
	var one jobJSON
	r.json(t, &one)
	if r.Status != 200 || one.State != "succeeded" || strings.Join(outputNames(one), ",") != "diagram.svg" {
		t.Fatalf("dot-svg named diagram: %d %s with outputs %v, want succeeded with diagram.svg", r.Status, one.State, outputNames(one))
	}

	r, pages := submitFields(t, c, key, "pdf-png", samples.PDF("scan", 3), map[string]any{"options": map[string]any{"dpi": 36}, "output_name": "Q3_scan.v2"}, "?wait=60", nil)
	if r.Status != 200 || pages.State != "succeeded" || strings.Join(outputNames(pages), ",") != "Q3_scan.v2-1.png,Q3_scan.v2-2.png,Q3_scan.v2-3.png" {
		t.Fatalf("pdf-png of 3 pages named Q3_scan.v2: %d %s with outputs %v, want succeeded with Q3_scan.v2-1.png … -3.png", r.Status, pages.State, outputNames(pages))
	}
	var named struct {
		OutputName string `json:"output_name"`
	}
	r.json(t, &named)
	if named.OutputName != "Q3_scan.v2" {
		t.Errorf("the job's output_name is %q, want Q3_scan.v2", named.OutputName)
	}
	for _, j := range []jobJSON{one, pages} {
		for _, o := range j.Outputs {
			if o.URL != "/v1/jobs/"+j.ID+"/outputs/"+o.Name {
				t.Errorf("output %s has URL %s", o.Name, o.URL)
			}
		}
		downloadAll(t, c, key, j)
	}
	if r := c.do("GET", "/v1/jobs/"+pages.ID+"/outputs/Q3_scan.v2-1.png", key, "", nil, nil); r.Status != 200 ||
		!strings.Contains(r.Header.Get("Content-Disposition"), `filename=Q3_scan.v2-1.png`) {
		t.Errorf("the first page by its new name: %d, Content-Disposition %q", r.Status, r.Header.Get("Content-Disposition"))
	}
	for _, old := range []string{one.ID + "/outputs/output.svg", pages.ID + "/outputs/page-1.png"} {
		if r := c.do("GET", "/v1/jobs/"+old, key, "", nil, nil); r.Status != 404 || r.problemCode(t) != "not_found" {
			t.Errorf("GET %s by the renderer's name: %d %s, want 404 not_found", old, r.Status, tail(r.Body))
		}
	}

	dot := base64.StdEncoding.EncodeToString(samples.DOT("a"))
	for _, tc := range []struct{ what, body string }{
		{"a leading dot", `"output_name":".hidden"`},
		{"a slash", `"output_name":"a/b"`},
		{"a parent", `"output_name":".."`},
		{"a space", `"output_name":"a b"`},
		{"a quote", `"output_name":"a\"b"`},
		{"a non-ASCII letter", `"output_name":"r\u00e9sum\u00e9"`},
		{"an RTL override", `"output_name":"x\u202Efdp.exe"`},
		{"101 bytes", `"output_name":"` + strings.Repeat("n", 101) + `"`},
		{"a number", `"output_name":7`},
		{"null", `"output_name":null`},
		{"the field twice", `"output_name":"a","output_name":"b"`},
	} {
		r := c.do("POST", "/v1/jobs", key, "application/json", []byte(`{"renderer":"dot-svg","input_base64":"`+dot+`",`+tc.body+`}`), nil)
		if r.Status != 400 || r.problemCode(t) != "invalid_request" || len(r.Body) > 1024 {
			t.Errorf("JSON with %s: %d %s, want a short 400 invalid_request", tc.what, r.Status, tail(r.Body))
		}
	}
	for _, name := range []string{"../../etc/passwd", "", strings.Repeat("n", 9000)} {
		ct, body := multipartBody(map[string]string{"renderer": "dot-svg", "output_name": name}, samples.DOT("a"))
		r := c.do("POST", "/v1/jobs", key, ct, body, nil)
		if name == "" {
			// An empty part is no name: the renderer's own.
			if r.Status != 202 {
				t.Errorf("multipart with an empty output_name: %d %s, want 202", r.Status, tail(r.Body))
			}
			continue
		}
		want, code := 400, "invalid_request"
		if len(name) > 8<<10 {
			want, code = 413, "field_too_large"
		}
		if r.Status != want || r.problemCode(t) != code {
			t.Errorf("multipart with output_name %.20q (%d bytes): %d %s, want %d %s", name, len(name), r.Status, tail(r.Body), want, code)
		}
	}
}

// The worker checks output_name again: a task altered in Redis to carry a
// name the API refuses fails its job, and no output is written.
func TestForgedOutputNameFailsTheJob(t *testing.T) {
	s := newStack(t, stackOpts{noWorker: true})
	key := s.key("forger")
	r, j := submitFields(t, s.client, key, "dot-svg", samples.DOT("a"), map[string]any{"output_name": "goodnm"}, "", nil)
	if r.Status != 202 {
		t.Fatalf("submitting: %d %s", r.Status, tail(r.Body))
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.redis})
	defer rdb.Close()
	ctx := context.Background()
	task := "asynq:{default}:t:" + j.ID
	var msg []byte
	waitFor(t, "the job's task to reach asynq", 10*time.Second, func() bool {
		msg, _ = rdb.HGet(ctx, task, "msg").Bytes()
		return len(msg) > 0
	})
	// The same length keeps the task's protobuf framing valid.
	forged := bytes.Replace(msg, []byte(`"output_name":"goodnm"`), []byte(`"output_name":"../etc"`), 1)
	if bytes.Equal(forged, msg) {
		t.Fatalf("the queued task does not carry output_name goodnm: %q", msg)
	}
	if err := rdb.HSet(ctx, task, "msg", forged).Err(); err != nil {
		t.Fatal(err)
	}
	s.startWorker()
	end := waitEnded(t, s.client, key, j.ID, 60*time.Second)
	if end.State != "failed" || end.Error == nil || end.Error.Code != "internal" || !strings.Contains(end.Error.Message, "output_name") || len(end.Outputs) != 0 {
		t.Errorf("the forged job: %s %+v with %d outputs, want failed internal naming output_name, none", end.State, end.Error, len(end.Outputs))
	}
	if keys, _ := rdb.Keys(ctx, "renderbox:blob:"+j.ID+":out:*").Result(); len(keys) != 0 {
		t.Errorf("outputs written for the forged job: %v", keys)
	}
}

// maxZipGrowth bounds what five downloads of a job's ZIP (one whole, four
// slow at once) may add to the API's memory: measured 5.3–8.0 MiB for 51 MiB
// of outputs alone, once 18.4 MiB in a full CI run (the peak includes the
// Go heap's slack before its next collection), and 38 MiB while each
// download kept every read output's last chunk; holding the outputs would
// take their size each.
const maxZipGrowth = 24 << 20

// GET …/outputs.zip streams every output of a succeeded job as one ZIP
// whose entries are the single downloads byte for byte, without holding
// the outputs in the API's memory; it answers as a single download does
// for another key's job, a job without outputs and an expired output.
func TestOutputsZip(t *testing.T) {
	s := newStack(t, stackOpts{})
	c := s.client
	key, other := s.key("zipper"), s.key("other")

	// Twenty pages of noise at 100 dpi: 2.8 MB of PNG each, near the
	// renderer's 64 MiB of outputs.
	r, big := submitFields(t, c, key, "pdf-png", samples.NoisePDF(20, 850, 1100, 13),
		map[string]any{"options": map[string]any{"dpi": 100}, "output_name": "scan"}, "?wait=60", nil)
	if r.Status != 200 || big.State != "succeeded" || len(big.Outputs) != 20 {
		t.Fatalf("pdf-png of twenty noisy pages: %d %s with %d outputs (%+v), want succeeded with twenty", r.Status, big.State, len(big.Outputs), big.Error)
	}
	var total int64
	for _, o := range big.Outputs {
		total += o.Size
	}
	singles := downloadAll(t, c, key, big)
	zipURL := "/v1/jobs/" + big.ID + "/outputs.zip"

	var whole *response
	grew := s.apiMemoryGrowth(func() {
		whole = c.do("GET", zipURL, key, "", nil, nil)
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if n, err := slowZipDownload(s.base+zipURL, key); err != nil || n != int64(len(whole.Body)) {
					t.Errorf("slow reader %d: %d bytes, %v; want the %d of the whole ZIP", i, n, err, len(whole.Body))
				}
			}()
		}
		wg.Wait()
	})
	t.Logf("five downloads of a ZIP of %d outputs, %s: the API's peak memory grew %s", len(big.Outputs), mib(total), mib(grew))
	if grew > maxZipGrowth {
		t.Errorf("the API's memory grew %s during five downloads of a %s ZIP, want < %s", mib(grew), mib(total), mib(maxZipGrowth))
	}
	checkZip(t, whole, "scan.zip", big, singles)

	// A job without output_name: its ZIP is named after it; text stored
	// too, so the ZIP never answers much less than Redis sends.
	r, svg := submitFields(t, c, key, "dot-svg", samples.DOT("a", "b"), nil, "?wait=60", nil)
	if r.Status != 200 || svg.State != "succeeded" {
		t.Fatalf("dot-svg: %d %s", r.Status, svg.State)
	}
	z := checkZip(t, c.do("GET", "/v1/jobs/"+svg.ID+"/outputs.zip", key, "", nil, nil), svg.ID+".zip", svg, downloadAll(t, c, key, svg))
	if z != nil && z.File[0].Method != zip.Store {
		t.Errorf("output.svg is in the ZIP with method %d, want stored", z.File[0].Method)
	}

	r, failed := submitFields(t, c, key, "dot-svg", samples.DOT("a"), map[string]any{"limits": map[string]any{"timeout_seconds": 0.001}}, "?wait=60", nil)
	if r.Status != 200 || failed.State != "failed" {
		t.Fatalf("a job with a 1 ms timeout: %d %s, want failed", r.Status, failed.State)
	}
	for _, tc := range []struct {
		what, path, key string
		status          int
		code            string
	}{
		{"a failed job", "/v1/jobs/" + failed.ID + "/outputs.zip", key, 404, "not_found"},
		{"another key's job", zipURL, other, 404, "not_found"},
		{"no such job", "/v1/jobs/job_nope/outputs.zip", key, 404, "not_found"},
		{"no key", zipURL, "", 401, ""},
	} {
		r := c.do("GET", tc.path, tc.key, "", nil, nil)
		if r.Status != tc.status || tc.code != "" && r.problemCode(t) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.what, r.Status, tail(r.Body), tc.status, tc.code)
		}
		if tc.status == 404 && r.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: Content-Type %q, want a problem", tc.what, r.Header.Get("Content-Type"))
		}
	}

	// An output past its retention: the ZIP is 410, as the output is.
	rdb := redis.NewClient(&redis.Options{Addr: s.redis})
	defer rdb.Close()
	if err := rdb.Del(context.Background(), queue.OutputKey(big.ID, big.Outputs[4].Name)).Err(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{zipURL, big.Outputs[4].URL} {
		if r := c.do("GET", path, key, "", nil, nil); r.Status != 410 || r.problemCode(t) != "output_expired" {
			t.Errorf("GET %s with an expired output: %d %s, want 410 output_expired", path, r.Status, tail(r.Body))
		}
	}
}

// checkZip checks a ZIP download of job j: its headers, and entries that
// are j's outputs in order, byte for byte as downloaded alone, with their
// digests, dated when the job finished.
func checkZip(t *testing.T, r *response, filename string, j jobJSON, singles map[string][]byte) *zip.Reader {
	t.Helper()
	if r.Status != 200 || r.Header.Get("Content-Type") != "application/zip" ||
		r.Header.Get("Content-Disposition") != "attachment; filename="+filename {
		t.Errorf("GET outputs.zip: %d, Content-Type %q, Content-Disposition %q; want 200 application/zip, attachment; filename=%s",
			r.Status, r.Header.Get("Content-Type"), r.Header.Get("Content-Disposition"), filename)
		return nil
	}
	z, err := zip.NewReader(bytes.NewReader(r.Body), int64(len(r.Body)))
	if err != nil {
		t.Errorf("outputs.zip of %d bytes does not read as a ZIP: %v", len(r.Body), err)
		return nil
	}
	if len(z.File) != len(j.Outputs) {
		t.Errorf("outputs.zip has %d entries, want the job's %d outputs", len(z.File), len(j.Outputs))
		return z
	}
	for i, f := range z.File {
		o := j.Outputs[i]
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc) // the CRC is checked at the end
		rc.Close()
		sum := sha256.Sum256(data)
		if err != nil || f.Name != o.Name || !bytes.Equal(data, singles[o.Name]) || hex.EncodeToString(sum[:]) != o.SHA256 {
			t.Errorf("entry %d: %s of %d bytes (%v), want %s, the %d bytes of its download with sha256 %s", i, f.Name, len(data), err, o.Name, o.Size, o.SHA256)
		}
		if !f.Modified.Equal(j.FinishedAt.Truncate(time.Second)) {
			t.Errorf("entry %s is dated %v, want the job's end %v", f.Name, f.Modified, j.FinishedAt)
		}
	}
	return z
}

// slowZipDownload reads a ZIP at about 20 MiB/s and returns its length.
func slowZipDownload(url, key string) (int64, error) {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	buf := make([]byte, 64<<10)
	var n int64
	for {
		k, err := io.ReadFull(resp.Body, buf)
		n += int64(k)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		time.Sleep(3 * time.Millisecond)
	}
}

// forged is an output written by a test in place of a worker.
type forged struct {
	name, mediaType string
	data            []byte
}

// forgeOutputs ends job id the way a worker would: each output a blob in
// Redis, then a succeeded event that the API applies to the ledger.
func forgeOutputs(t *testing.T, s *stack, id string, outs ...forged) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.redis})
	defer rdb.Close()
	q := queue.New(rdb, time.Hour)
	ctx := context.Background()
	var listed []queue.Output
	for _, o := range outs {
		if err := q.PutBlob(ctx, queue.OutputKey(id, o.name), o.data); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(o.data)
		listed = append(listed, queue.Output{Name: o.name, Size: int64(len(o.data)), SHA256: hex.EncodeToString(sum[:]), MediaType: o.mediaType})
	}
	for _, state := range []jobstate.State{jobstate.Running, jobstate.Succeeded} {
		ev := queue.Event{JobID: id, State: state, At: time.Now()}
		if state == jobstate.Succeeded {
			ev.Outputs = listed
		}
		if err := q.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
}

// An output that expires while its ZIP streams (after the 200 went out)
// cuts the connection: the client sees a broken download, never a ZIP
// that ends early as if whole.
func TestOutputsZipCutWhenAnOutputVanishes(t *testing.T) {
	s := newStack(t, stackOpts{noWorker: true})
	key := s.key("cut")
	id := submitOK(t, s.client, key, "dot-svg", samples.DOT("a"))
	first := make([]byte, 32<<20)
	_, _ = rand.NewChaCha8([32]byte{2}).Read(first)
	forgeOutputs(t, s, id, forged{"a.png", "image/png", first}, forged{"b.png", "image/png", []byte("second")})
	waitEnded(t, s.client, key, id, 10*time.Second)

	req, _ := http.NewRequest("GET", s.base+"/v1/jobs/"+id+"/outputs.zip", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("outputs.zip: %d, want 200", resp.StatusCode)
	}
	// The API is still writing a.png when b.png goes.
	var got bytes.Buffer
	if _, err := io.CopyN(&got, resp.Body, 1<<20); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.redis})
	defer rdb.Close()
	if err := rdb.Del(context.Background(), queue.OutputKey(id, "b.png")).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(&got, resp.Body)
	if err == nil {
		t.Errorf("the download of %d bytes ended cleanly, want a cut connection", got.Len())
	}
	if _, zerr := zip.NewReader(bytes.NewReader(got.Bytes()), int64(got.Len())); zerr == nil {
		t.Errorf("the %d bytes read as a whole ZIP", got.Len())
	}
	waitFor(t, "the API to log the cut download", 5*time.Second, func() bool {
		return strings.Contains(s.api.output(), "streaming outputs.zip")
	})
}
