package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/renderbox/renderbox"
	"github.com/renderbox/renderbox/internal/api"
	"github.com/renderbox/renderbox/internal/buildinfo"
	"github.com/renderbox/renderbox/internal/render"
)

// get fetches path and validates the response against openapi.yaml.
func get(t *testing.T, srv *httptest.Server, path string) (*http.Response, []byte) {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(renderbox.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is invalid: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: srv.URL}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s is not in openapi.yaml: %v", path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(body)),
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("GET %s: the response does not match openapi.yaml: %v", path, err)
	}
	return resp, body
}

func TestRoutesMatchTheContract(t *testing.T) {
	srv := httptest.NewServer((&api.Server{OpenAPI: renderbox.OpenAPI}).Handler())
	defer srv.Close()

	resp, body := get(t, srv, "/v1/renderers")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var list struct {
		Renderers []struct {
			Name string `json:"name"`
		} `json:"renderers"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Renderers) != len(render.Names()) {
		t.Errorf("served %d renderers, the catalogue has %d", len(list.Renderers), len(render.Names()))
	}
	if resp, _ := get(t, srv, "/healthz"); resp.StatusCode != 200 {
		t.Errorf("healthz status %d", resp.StatusCode)
	}
	if resp, body := get(t, srv, "/openapi.yaml"); resp.StatusCode != 200 || string(body) != string(renderbox.OpenAPI) {
		t.Errorf("openapi.yaml served with status %d and %d bytes", resp.StatusCode, len(body))
	}
}

func TestUnknownRouteIsAProblem(t *testing.T) {
	srv := httptest.NewServer((&api.Server{OpenAPI: renderbox.OpenAPI}).Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/nope")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&p)
	if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/problem+json" || p["code"] != "not_found" {
		t.Errorf("got %d %s %v, want a 404 problem with code not_found", resp.StatusCode, resp.Header.Get("Content-Type"), p)
	}
}

func TestHTTPLimitsValidate(t *testing.T) {
	wait := time.Minute
	for _, c := range []struct {
		name string
		l    api.HTTPLimits
		ok   bool
	}{
		{"defaults", api.HTTPLimits{}, true},
		{"write timeout above the longest wait", api.HTTPLimits{WriteTimeout: wait + time.Second}, true},
		{"write timeout at the longest wait", api.HTTPLimits{WriteTimeout: wait}, false},
		{"negative idle timeout", api.HTTPLimits{IdleTimeout: -time.Second}, false},
		{"negative rate", api.HTTPLimits{MinRate: -1}, false},
		{"negative in-flight cap", api.HTTPLimits{MaxInFlight: -1}, false},
		{"negative per-key cap", api.HTTPLimits{MaxInFlightPerKey: -1}, false},
	} {
		if err := c.l.Validate(wait); (err == nil) != c.ok {
			t.Errorf("%s: got %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

// GET /version answers the build without a key, as the contract says, and
// the metrics carry it as renderbox_build_info.
func TestVersion(t *testing.T) {
	build := buildinfo.Info{Version: "v1.2.3", Revision: "4ed8459c", Time: "2026-12-03T13:10:00Z", Modified: true, GoVersion: "go1.26.8"}
	s := &api.Server{OpenAPI: renderbox.OpenAPI, Build: build}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	resp, body := get(t, srv, "/version")
	var got buildinfo.Info
	if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != 200 || got != build {
		t.Errorf("GET /version: %d %s (%v), want 200 and %+v", resp.StatusCode, body, err, build)
	}
	msrv := httptest.NewServer(s.MetricsHandler())
	defer msrv.Close()
	mresp, err := http.Get(msrv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	if want := `renderbox_build_info{goversion="go1.26.8",revision="4ed8459c",version="v1.2.3"} 1`; !strings.Contains(string(m), want) {
		t.Errorf("/metrics lacks %s", want)
	}

	// Unset, it is the running binary's own.
	srv2 := httptest.NewServer((&api.Server{OpenAPI: renderbox.OpenAPI}).Handler())
	defer srv2.Close()
	_, body = get(t, srv2, "/version")
	if err := json.Unmarshal(body, &got); err != nil || got.GoVersion != runtime.Version() || got.Version == "" {
		t.Errorf("GET /version of a server without Build: %s, want this binary's build (%s)", body, runtime.Version())
	}
}
