//go:build !unit

package api_test

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/api"
)

func urlJob(renderer, url string) string {
	b, _ := json.Marshal(map[string]any{"renderer": renderer, "url": url})
	return string(b)
}

// A page by its URL is refused, naming the setting, by a server that does
// not fetch; taken by one that does, for html-pdf and html-png only, with
// an http or https URL; and given one way only.
func TestURLInput(t *testing.T) {
	off := newKeyed(t)
	a := off.call("POST", "/v1/jobs", "application/json", urlJob("html-pdf", "https://example.com/"))
	if a.status != 400 || a.code != "remote_content_disabled" || !strings.Contains(a.detail, "-remote-content") || !strings.Contains(a.detail, "RENDERBOX_REMOTE_CONTENT") {
		t.Errorf("url on a server without remote content: %d %s, want 400 remote_content_disabled naming the setting", a.status, a.body)
	}
	matchesContract(t, a)

	on := newKeyedWith(t, func(s *api.Server) { s.Remote = api.RemoteContent{Enabled: true} })
	for _, tc := range []struct {
		name, body, ctype string
		status            int
		code              string
	}{
		{"html-pdf", urlJob("html-pdf", "https://example.com/a?b=c"), "application/json", 202, ""},
		{"html-png", urlJob("html-png", "http://example.com/"), "application/json", 202, ""},
		{"file", urlJob("html-pdf", "file:///etc/passwd"), "application/json", 400, "invalid_input"},
		{"credentials", urlJob("html-pdf", "https://u:p@example.com/"), "application/json", 400, "invalid_input"},
		{"office-pdf", urlJob("office-pdf", "https://example.com/a.docx"), "application/json", 400, "unsupported_input"},
		{"and a file", `{"renderer":"html-pdf","url":"https://example.com/","input_base64":"PHA+"}`, "application/json", 400, "invalid_request"},
		{"input_type", `{"renderer":"html-pdf","url":"https://example.com/","input_type":"text/html"}`, "application/json", 400, "invalid_request"},
	} {
		a := on.call("POST", "/v1/jobs", tc.ctype, tc.body)
		if a.status != tc.status || (tc.code != "" && a.code != tc.code) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, a.status, a.body, tc.status, tc.code)
		}
		matchesContract(t, a)
	}
	// Multipart takes it as a field.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("renderer", "html-png")
	_ = mw.WriteField("url", "https://example.com/")
	_ = mw.Close()
	if a := on.call("POST", "/v1/jobs", mw.FormDataContentType(), body.String()); a.status != 202 {
		t.Errorf("multipart url: %d %s, want 202", a.status, a.body)
	}
}
