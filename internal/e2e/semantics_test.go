//go:build !unit

package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/samples"
)

// What an HTTP client expects of the API beyond its own routes (issue
// 15): HEAD wherever GET is, Allow on a 405, 415 for a body of another
// type, an idempotent DELETE, unknown query parameters refused, list and get showing one
// job shape. Every answer through c.do is
// checked against openapi.yaml.
func TestHTTPSemantics(t *testing.T) {
	// Webhooks may go to 127.0.0.2, where nothing answers: a job's webhook
	// then shows in the job as waiting for its end.
	s := newStack(t, stackOpts{noWorker: true, apiArgs: []string{"-webhook-allow", "127.0.0.2/32"}})
	c := s.client
	key := s.key("semantics")
	id := submitOK(t, c, key, "dot-svg", samples.DOT("semantics"))
	forgeOutputs(t, s, id, forged{"output.svg", "image/svg+xml", []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`)})
	if j := waitEnded(t, c, key, id, 10*time.Second); j.State != "succeeded" {
		t.Fatalf("the forged job is %s, want succeeded", j.State)
	}

	t.Run("HEAD wherever GET", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz", "/version", "/openapi.yaml", "/v1/renderers",
			"/v1/jobs", "/v1/jobs/" + id, "/v1/jobs/" + id + "/outputs.zip", "/v1/webhook-secret"} {
			g := c.do("GET", path, key, "", nil, nil)
			h := c.do("HEAD", path, key, "", nil, nil)
			if h.Status != g.Status || h.Header.Get("Content-Type") != g.Header.Get("Content-Type") || len(h.Body) != 0 {
				t.Errorf("HEAD %s: %d %q with %d body bytes; want GET's %d %q and no body", path, h.Status, h.Header.Get("Content-Type"), len(h.Body), g.Status, g.Header.Get("Content-Type"))
			}
		}
		if h := c.do("HEAD", "/v1/jobs/job_nope", key, "", nil, nil); h.Status != 404 {
			t.Errorf("HEAD of no job: %d, want 404", h.Status)
		}
		if h := c.do("HEAD", "/v1/jobs/"+id, "", "", nil, nil); h.Status != 401 {
			t.Errorf("HEAD of a job without a key: %d, want 401", h.Status)
		}
	})

	// 405s are not in the contract (no operation answers them), so they
	// are asked for directly.
	t.Run("Allow on 405", func(t *testing.T) {
		for _, tc := range []struct{ method, path, allow string }{
			{"PUT", "/v1/jobs/" + id, "GET, HEAD, DELETE"},
			{"DELETE", "/v1/jobs", "GET, HEAD, POST"},
			{"POST", "/healthz", "GET, HEAD"},
			{"DELETE", "/v1/jobs/" + id + "/outputs/output.svg", "GET, HEAD"},
		} {
			req, _ := http.NewRequest(tc.method, s.base+tc.path, nil)
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 405 || resp.Header.Get("Allow") != tc.allow || resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s %s: %d, Allow %q, %s; want a 405 problem with Allow %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), resp.Header.Get("Content-Type"), tc.allow)
			}
		}
	})

	t.Run("415 for another Content-Type", func(t *testing.T) {
		r := c.do("POST", "/v1/jobs", key, "application/xml", []byte("<job/>"), nil)
		if r.Status != 415 || r.problemCode(t) != "unsupported_media_type" || r.Header.Get("Accept") != "multipart/form-data, application/json" {
			t.Errorf("an XML body: %d %s (Accept %q), want 415 unsupported_media_type naming the two types", r.Status, tail(r.Body), r.Header.Get("Accept"))
		}
	})

	t.Run("DELETE is idempotent", func(t *testing.T) {
		queued := submitOK(t, c, key, "dot-svg", samples.DOT("to cancel"))
		first := c.do("DELETE", "/v1/jobs/"+queued, key, "", nil, nil)
		again := c.do("DELETE", "/v1/jobs/"+queued, key, "", nil, nil)
		if first.Status != 200 || again.Status != 200 || !bytes.Equal(first.Body, again.Body) {
			t.Errorf("cancel, then again: %d then %d %s, want 200 twice with the same job", first.Status, again.Status, tail(again.Body))
		}
		if r := c.do("DELETE", "/v1/jobs/"+id, key, "", nil, nil); r.Status != 409 || r.problemCode(t) != "already_finished" {
			t.Errorf("cancel of a succeeded job: %d %s, want 409 already_finished", r.Status, tail(r.Body))
		}
	})

	t.Run("unknown query parameters", func(t *testing.T) {
		for _, path := range []string{"/v1/jobs?limt=5", "/v1/jobs/" + id + "?wiat=5", "/healthz?verbose=1", "/v1/jobs/" + id + "/outputs/output.svg?inline=1"} {
			r := c.do("GET", path, key, "", nil, nil)
			var p struct {
				Code   string `json:"code"`
				Detail string `json:"detail"`
			}
			r.json(t, &p)
			if r.Status != 400 || p.Code != "invalid_request" || !strings.Contains(p.Detail, "unknown query parameter") {
				t.Errorf("GET %s: %d %s, want 400 invalid_request naming the parameter", path, r.Status, tail(r.Body))
			}
		}
	})

	t.Run("list shows what get shows", func(t *testing.T) {
		r, hooked := submitFields(t, c, key, "dot-svg", samples.DOT("hooked"), map[string]any{"callback_url": "http://127.0.0.2:9/hook"}, "", nil)
		if r.Status != 202 {
			t.Fatalf("submitting with a callback_url: %d %s", r.Status, tail(r.Body))
		}
		var list struct {
			Jobs []json.RawMessage `json:"jobs"`
		}
		c.do("GET", "/v1/jobs?limit=100", key, "", nil, nil).json(t, &list)
		var listed json.RawMessage
		for _, j := range list.Jobs {
			if bytes.Contains(j, []byte(`"id":"`+hooked.ID+`"`)) {
				listed = j
			}
		}
		got := c.do("GET", "/v1/jobs/"+hooked.ID, key, "", nil, nil)
		if !bytes.Equal(bytes.TrimSpace(got.Body), listed) || !bytes.Contains(listed, []byte(`"webhook":{"url":"http://127.0.0.2:9/hook"`)) {
			t.Errorf("the job with a webhook\nlisted as %s\nGET shows %s\nwant the same, webhook included", listed, got.Body)
		}
	})
}

// A request's id travels with the job it submits: returned in
// X-Request-Id, in the API's access log line, in the job's record and on
// the worker's log lines for the job. One sent by a trusted proxy is kept; others are
// replaced by the API's own.
func TestRequestIDReachesTheWorker(t *testing.T) {
	s := newStack(t, stackOpts{apiArgs: []string{"-trusted-proxies", "127.0.0.1"}})
	key := s.key("traced")
	r, j := submitJSON(t, s.client, key, "svg-png", samples.SVG(40, 40, 5, 5, 10), nil, "?wait=30", map[string]string{"X-Request-Id": "lb-e2e-7f3a"})
	if r.Status != 200 || j.State != "succeeded" || r.Header.Get("X-Request-Id") != "lb-e2e-7f3a" {
		t.Fatalf("a traced job: %d %s, X-Request-Id %q; want succeeded and the proxy's id", r.Status, j.State, r.Header.Get("X-Request-Id"))
	}
	r2, j2 := submitJSON(t, s.client, key, "svg-png", samples.SVG(40, 40, 5, 5, 11), nil, "?wait=30", nil)
	own := r2.Header.Get("X-Request-Id")
	if r2.Status != 200 || j2.State != "succeeded" || !strings.HasPrefix(own, "req_") {
		t.Fatalf("a job without an id: %d %s, X-Request-Id %q; want succeeded and an id of the API's own", r2.Status, j2.State, own)
	}
	for _, c := range []struct{ job, id string }{{j.ID, "lb-e2e-7f3a"}, {j2.ID, own}} {
		want := `"request_id":"` + c.id + `"`
		if got := s.client.do("GET", "/v1/jobs/"+c.job, key, "", nil, nil); !strings.Contains(string(got.Body), want) {
			t.Errorf("the job %s does not record %s: %s", c.job, want, tail(got.Body))
		}
		finished := false
		for _, l := range strings.Split(s.worker.output(), "\n") {
			if strings.Contains(l, `"job_id":"`+c.job+`"`) && strings.Contains(l, `"msg":"job finished"`) {
				finished = strings.Contains(l, want)
			}
		}
		if !finished {
			t.Errorf("the worker's \"job finished\" line for %s lacks %s:\n%s", c.job, want, tailStr(s.worker.output(), 3000))
		}
		if !strings.Contains(s.api.output(), `"msg":"http request","method":"POST","path":"/v1/jobs","status":200`) || !strings.Contains(s.api.output(), want) {
			t.Errorf("the API's access log lacks the POST with %s:\n%s", want, tailStr(s.api.output(), 3000))
		}
	}
}
