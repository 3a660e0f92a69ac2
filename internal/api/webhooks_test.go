package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/renderbox/renderbox"
	"github.com/renderbox/renderbox/internal/api"
)

// What an operator has not turned on is refused with a clear code, never
// silently ignored: callback_url without webhooks, diagnostic renderers.
func TestOffByDefaultIsRefused(t *testing.T) {
	store, secret, _ := keyedLedger(t)
	srv := httptest.NewServer((&api.Server{OpenAPI: renderbox.OpenAPI, Ledger: store}).Handler())
	defer srv.Close()
	call := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p struct {
			Code string `json:"code"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&p)
		return resp.StatusCode, p.Code
	}
	if st, code := call("POST", "/v1/jobs", `{"renderer":"svg-png","input_base64":"PHN2Zy8+","callback_url":"https://hooks.example.com/"}`); st != 400 || code != "webhooks_disabled" {
		t.Errorf("callback_url with webhooks off: %d %s, want 400 webhooks_disabled", st, code)
	}
	if st, code := call("GET", "/v1/webhook-secret", ""); st != 404 || code != "webhooks_disabled" {
		t.Errorf("webhook secret with webhooks off: %d %s, want 404 webhooks_disabled", st, code)
	}
	// Diagnostic renderers are off by default too.
	if st, code := call("POST", "/v1/jobs", `{"renderer":"sandbox-probe","input_base64":"cHJvYmUK"}`); st != 400 || code != "unknown_renderer" {
		t.Errorf("sandbox-probe without -diagnostics: %d %s, want 400 unknown_renderer", st, code)
	}
}
