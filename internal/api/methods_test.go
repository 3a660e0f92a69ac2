package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/renderbox/renderbox"
	"github.com/renderbox/renderbox/internal/api"
)

// A 405 says which methods the path has (RFC 9110 §15.5.6), whether or
// not the request carries a key.
func TestMethodNotAllowedListsAllow(t *testing.T) {
	srv := httptest.NewServer((&api.Server{OpenAPI: renderbox.OpenAPI}).Handler())
	defer srv.Close()
	for _, c := range []struct{ method, path, allow string }{
		{"PUT", "/healthz", "GET, HEAD"},
		{"POST", "/version", "GET, HEAD"},
		{"PATCH", "/v1/jobs", "GET, HEAD, POST"},
		{"PUT", "/v1/jobs/job_x", "GET, HEAD, DELETE"},
		{"DELETE", "/v1/jobs/job_x/outputs/page-1.png", "GET, HEAD"},
		{"POST", "/v1/jobs/job_x/outputs.zip", "GET, HEAD"},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Code string `json:"code"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != c.allow || p.Code != "method_not_allowed" {
			t.Errorf("%s %s: got %d, Allow %q, code %q; want 405, Allow %q, method_not_allowed",
				c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), p.Code, c.allow)
		}
	}
}

// HEAD answers as GET does, without the body.
func TestHeadAnswersAsGet(t *testing.T) {
	srv := httptest.NewServer((&api.Server{OpenAPI: renderbox.OpenAPI}).Handler())
	defer srv.Close()
	for _, path := range []string{"/healthz", "/readyz", "/version", "/openapi.yaml", "/v1/renderers", "/v1/jobs"} {
		g, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(g.Body)
		g.Body.Close()
		h, err := http.Head(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		hb, _ := io.ReadAll(h.Body)
		h.Body.Close()
		if h.StatusCode != g.StatusCode || h.Header.Get("Content-Type") != g.Header.Get("Content-Type") || len(hb) != 0 {
			t.Errorf("HEAD %s: got %d %q and %d body bytes; want GET's %d %q and none",
				path, h.StatusCode, h.Header.Get("Content-Type"), len(hb), g.StatusCode, g.Header.Get("Content-Type"))
		}
		if g.StatusCode == 200 && h.ContentLength != int64(len(body)) {
			t.Errorf("HEAD %s: Content-Length %d, want GET's body size %d", path, h.ContentLength, len(body))
		}
	}
}
