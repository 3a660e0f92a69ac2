package render

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// A page by url sends its cookies, headers and basic authentication to
// its own host (or credentials_host's); a file input may not name them,
// and a refusal never echoes a secret.
func TestPageHeaders(t *testing.T) {
	r, err := Lookup("html-pdf")
	if err != nil {
		t.Fatal(err)
	}
	opts, _ := json.Marshal(map[string]any{
		"cookies": "session=SECRET1", "extra_http_headers": "X-Token: SECRET2\nAccept-Language: fr",
		"http_username": "ann", "http_password": "SECRET3",
	})
	plan, err := r.PrepareTyped([]byte("https://docs.example.com/a"), TypeURL, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	scope, h := plan.PageHeaders()
	if scope != "docs.example.com" || h.Get("Cookie") != "session=SECRET1" || h.Get("X-Token") != "SECRET2" ||
		h.Get("Accept-Language") != "fr" || h.Get("Authorization") != "Basic YW5uOlNFQ1JFVDM=" {
		t.Errorf("scope %q, headers %v", scope, h)
	}
	if rec, _ := json.Marshal(r.Recorded(plan.Options)); strings.Contains(string(rec), "SECRET") {
		t.Errorf("the record keeps a secret: %s", rec)
	}
	if b, _ := json.Marshal(plan.Job.Request); strings.Contains(string(b), "SECRET") {
		t.Errorf("the sandbox's request carries a secret: %s", b)
	}
	opts, _ = json.Marshal(map[string]any{"cookies": "a=b", "credentials_host": "*.example.com"})
	if plan, err = r.PrepareTyped([]byte("https://docs.example.com/a"), TypeURL, opts, nil); err != nil {
		t.Fatal(err)
	}
	if scope, _ := plan.PageHeaders(); scope != "*.example.com" {
		t.Errorf("credentials_host: scope %q", scope)
	}
	for _, tc := range []struct {
		opts map[string]any
		want string
	}{
		{map[string]any{"extra_http_headers": "Host: SECRET4"}, "Host is not sent this way"},
		{map[string]any{"extra_http_headers": "no colon SECRET5"}, "line 1"},
		{map[string]any{"http_password": "SECRET6"}, "go together"},
	} {
		opts, _ := json.Marshal(tc.opts)
		_, err := r.PrepareTyped([]byte("https://docs.example.com/a"), TypeURL, opts, nil)
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%v: %v, want invalid options saying %q and no secret", tc.opts, err, tc.want)
		}
	}
	opts, _ = json.Marshal(map[string]any{"cookies": "a=b"})
	if _, err := r.PrepareTyped([]byte("<p>hi</p>"), "", opts, nil); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "cookies is for a page given by url") {
		t.Errorf("cookies with a file: %v", err)
	}
}

func TestURLOptionNames(t *testing.T) {
	var names []string
	for _, o := range urlOptions() {
		names = append(names, o.Name)
	}
	if strings.Join(names, ",") != strings.Join(urlOptionNames, ",") {
		t.Errorf("urlOptionNames %q, urlOptions %q", urlOptionNames, names)
	}
}
