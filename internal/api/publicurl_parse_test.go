package api_test

import (
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/api"
)

func TestParsePublicURL(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "", want: ""},
		{in: "https://render.example.com", want: "https://render.example.com"},
		{in: "https://render.example.com/", want: "https://render.example.com"},
		{in: "http://10.0.0.21:8080", want: "http://10.0.0.21:8080"},
		{in: "https://example.com/render/", want: "https://example.com/render"},
		{in: "https://example.com/a%20b", want: "https://example.com/a%20b"},
		{in: "ftp://example.com", err: "http or https"},
		{in: "render.example.com", err: "http or https"},
		{in: "https://", err: "no host"},
		{in: "https:render.example.com", err: "no host"},
		{in: "https://user:pw@example.com", err: "credentials"},
		{in: "https://example.com/?a=1", err: "query"},
		{in: "https://example.com/?", err: "query"},
		{in: "https://example.com/#top", err: "fragment"},
		{in: "https://example.com/#", err: "fragment"},
	} {
		got, err := api.ParsePublicURL(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParsePublicURL(%q) = %q, %v; want an error saying %q", tc.in, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("ParsePublicURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
