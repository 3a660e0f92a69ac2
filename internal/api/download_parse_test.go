package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/fetch"
)

func TestParseDownloads(t *testing.T) {
	specs, err := parseDownloads(json.RawMessage(`[{"url":"https://a.example/x.docx","headers":{"Authorization":"Bearer t"},"name":"x.docx"},{"url":"https://a.example/y"}]`))
	if err != nil || len(specs) != 2 || specs[0].Headers["Authorization"] != "Bearer t" {
		t.Fatalf("parseDownloads: %+v %v", specs, err)
	}
	for name, raw := range map[string]string{
		"not a list":       `{"url":"x"}`,
		"empty":            `[]`,
		"no url":           `[{"name":"a"}]`,
		"unknown member":   `[{"url":"x","method":"POST"}]`,
		"bad name":         `[{"url":"x","name":"../etc/passwd"}]`,
		"header with CRLF": `[{"url":"x","headers":{"X-A":"a\r\nHost: y"}}]`,
		"header name":      `[{"url":"x","headers":{"X A":"a"}}]`,
		"Host":             `[{"url":"x","headers":{"host":"y"}}]`,
		"Transfer-Enc":     `[{"url":"x","headers":{"Transfer-Encoding":"chunked"}}]`,
		"too many":         `[` + strings.TrimSuffix(strings.Repeat(`{"url":"x"},`, maxDownloads+1), ",") + `]`,
	} {
		if _, err := parseDownloads(json.RawMessage(raw)); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), "Host: y") {
			t.Errorf("%s: the error quotes a header's value: %v", name, err)
		} else if !errors.Is(err, errBadRequest) {
			t.Errorf("%s: %v, want a bad request", name, err)
		}
	}
}

func TestDownloadName(t *testing.T) {
	resp := func(cd string) *fetch.Response {
		h := http.Header{}
		if cd != "" {
			h.Set("Content-Disposition", cd)
		}
		return &fetch.Response{Header: h, URL: &url.URL{}}
	}
	for _, tc := range []struct {
		spec downloadSpec
		cd   string
		want string
	}{
		{downloadSpec{URL: "https://a.example/d/x.docx", Name: "css/s.css"}, `attachment; filename="y.docx"`, "css/s.css"},
		{downloadSpec{URL: "https://a.example/d/x.docx"}, `attachment; filename="../../y.docx"`, "y.docx"},
		{downloadSpec{URL: "https://a.example/d/x.docx?sig=1"}, "", "x.docx"},
		{downloadSpec{URL: "https://a.example/"}, "", ""},
	} {
		if got := downloadName(tc.spec, resp(tc.cd)); got != tc.want {
			t.Errorf("%+v with %q: %q, want %q", tc.spec, tc.cd, got, tc.want)
		}
	}
}
