package api

import (
	"fmt"
	"net/url"
	"strings"
)

// ParsePublicURL checks the base URL clients reach the API at (-public-url)
// and returns it without a trailing slash, ready to have "/v1/…" appended:
// http or https, a host, no credentials, query or fragment; a path prefix
// (https://example.com/render, a proxy that strips /render) is kept. ""
// stays "": the API then answers relative URLs, since the only other
// source of a host — the request's Host header — is the client's to write
// and would put a URL of its choosing in Location and in webhooks.
func ParsePublicURL(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", fmt.Errorf("-public-url %q: %w", raw, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("-public-url %q: want an http or https URL such as https://render.example.com", raw)
	case u.Host == "" || u.Opaque != "":
		return "", fmt.Errorf("-public-url %q: names no host (want e.g. https://render.example.com)", raw)
	case u.User != nil:
		return "", fmt.Errorf("-public-url %q: holds credentials; clients' own keys authenticate them", raw)
	case u.RawQuery != "" || u.ForceQuery:
		return "", fmt.Errorf("-public-url %q: has a query; give the scheme, host and an optional path prefix only", raw)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "", fmt.Errorf("-public-url %q: has a fragment; give the scheme, host and an optional path prefix only", raw)
	}
	return strings.TrimRight(u.Scheme+"://"+u.Host+u.EscapedPath(), "/"), nil
}

// link is path (which starts with /v1/…) as the job's JSON, Location and
// webhooks give it: under PublicURL when one is set, else relative.
func (s *Server) link(path string) string { return s.PublicURL + path }
