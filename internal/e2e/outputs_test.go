package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/samples"
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
