package api_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/renderbox/renderbox"
	"github.com/renderbox/renderbox/internal/api"
	"github.com/renderbox/renderbox/internal/cidr"

	"regexp"

	"encoding/json"
)

// Every request gets an id, returned in X-Request-Id; one a client sends
// is kept only from a trusted proxy; each request is one access log line
// carrying it.
func TestRequestIDAndAccessLog(t *testing.T) {
	for _, c := range []struct {
		name    string
		proxies string // trusted; the test's client is 127.0.0.1
		sent    string
		kept    bool
	}{
		{name: "no proxy trusted", sent: "from-the-client", kept: false},
		{name: "another proxy trusted", proxies: "10.0.0.0/8", sent: "from-the-client", kept: false},
		{name: "from a trusted proxy", proxies: "127.0.0.0/8", sent: "lb-7f3a:42", kept: true},
		{name: "a trusted proxy's unfit id", proxies: "127.0.0.1", sent: `two words "quoted"`, kept: false},
		{name: "a trusted proxy's overlong id", proxies: "127.0.0.1", sent: strings.Repeat("a", 129), kept: false},
		{name: "none sent", proxies: "127.0.0.1", sent: "", kept: false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			proxies, err := cidr.Parse(c.proxies)
			if err != nil {
				t.Fatal(err)
			}
			s := &api.Server{OpenAPI: renderbox.OpenAPI, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), TrustedProxies: proxies}
			srv := httptest.NewServer(s.Handler())
			req, _ := http.NewRequest("GET", srv.URL+"/healthz", nil)
			if c.sent != "" {
				req.Header.Set("X-Request-Id", c.sent)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			id := resp.Header.Get("X-Request-Id")
			if c.kept && id != c.sent {
				t.Errorf("X-Request-Id %q, want the proxy's %q", id, c.sent)
			}
			if !c.kept && !generatedID.MatchString(id) {
				t.Errorf("X-Request-Id %q, want one of the API's own (req_ and 32 hex digits)", id)
			}
			srv.Close()
			lines := accessLines(&logs)
			if len(lines) != 1 {
				t.Fatalf("access log %v, want one line", lines)
			}
			l := lines[0]
			if l["method"] != "GET" || l["path"] != "/healthz" || l["status"] != 200.0 || l["bytes"] != float64(len(body)) ||
				l["request_id"] != id || !strings.HasPrefix(l["remote"].(string), "127.0.0.1:") {
				t.Errorf("access log %v, want one line: GET /healthz 200 %d bytes, request_id %s, remote 127.0.0.1", lines, len(body), id)
			}
			if d, ok := l["duration_seconds"].(float64); !ok || d <= 0 || d > 5 {
				t.Errorf("duration_seconds %v, want seconds as a float", l["duration_seconds"])
			}
		})
	}
}

// Refusals are logged with their status, and a long path is cut.
func TestAccessLogOfRefusals(t *testing.T) {
	var logs bytes.Buffer
	srv := httptest.NewServer((&api.Server{OpenAPI: renderbox.OpenAPI, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}).Handler())
	long := "/" + strings.Repeat("x", 4000)
	for _, path := range []string{"/v1/jobs", long} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	srv.Close()
	lines := accessLines(&logs)
	if len(lines) != 2 {
		t.Fatalf("access log %v, want two lines", lines)
	}
	if lines[0]["status"] != 401.0 || lines[1]["status"] != 404.0 {
		t.Errorf("statuses logged %v and %v, want 401 and 404", lines[0]["status"], lines[1]["status"])
	}
	if p := lines[1]["path"].(string); len(p) > 520 || !strings.HasSuffix(p, "…") {
		t.Errorf("a 4001-byte path logged as %d bytes, want it cut at 512", len(p))
	}
}

var generatedID = regexp.MustCompile(`^req_[0-9a-f]{32}$`)

// accessLines returns the access log lines in logs. Read it once the
// server is closed: httptest.Server.Close waits for every request, so no
// handler writes to logs any more.
func accessLines(logs *bytes.Buffer) []map[string]any {
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err == nil && m["msg"] == "http request" {
			lines = append(lines, m)
		}
	}
	return lines
}
