package agent

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/agent/cdp"
	"github.com/renderbox/renderbox/internal/agent/cdp/cdptest"
)

func newTestInterceptor(t *testing.T) (*interceptor, *cdptest.Browser, *[]string) {
	t.Helper()
	c, b := cdptest.New(t)
	st := &site{
		page:     []byte("<p>the page</p>"),
		pagePath: "doc/index.html",
		files:    map[string][]byte{"doc/style.css": []byte("p{}"), "img/a b.png": []byte("PNG")},
	}
	var marks []string
	ic := newInterceptor(c, pagePolicy{site: st}, func(s string) { marks = append(marks, s) })
	ic.install()
	return ic, b, &marks
}

func paused(b *cdptest.Browser, session, id, method, url string) {
	b.Event(session, "Fetch.requestPaused", map[string]any{
		"requestId": id, "request": map[string]any{"url": url, "method": method},
	})
}

// The page gets the page and the job's files from its origin, a 404 for
// the job's files it does not have, and nothing else: other origins,
// other schemes and other methods are refused.
func TestInterceptorAnswersAsThePolicyDecides(t *testing.T) {
	ic, b, _ := newTestInterceptor(t)
	type fulfil struct {
		RequestID       string              `json:"requestId"`
		ResponseCode    int                 `json:"responseCode"`
		Body            string              `json:"body"`
		ResponseHeaders []map[string]string `json:"responseHeaders"`
		ErrorReason     string              `json:"errorReason"`
	}
	for _, tc := range []struct {
		method, url string
		answer      string // the command
		code        int
		contentType string
		body        string
	}{
		{"GET", pageURL + "doc/index.html", "Fetch.fulfillRequest", 200, "text/html; charset=utf-8", "<p>the page</p>"},
		{"GET", pageURL + "doc/style.css?v=1", "Fetch.fulfillRequest", 200, "text/css; charset=utf-8", "p{}"},
		{"GET", pageURL + "img/a%20b.png", "Fetch.fulfillRequest", 200, "image/png", "PNG"},
		{"GET", pageURL + "doc/../img/a%20b.png", "Fetch.fulfillRequest", 200, "image/png", "PNG"},
		{"GET", pageURL + "doc/missing.js", "Fetch.fulfillRequest", 404, "text/plain; charset=utf-8", "not in this job's files\n"},
		{"POST", pageURL + "doc/index.html", "Fetch.failRequest", 0, "", ""},
		{"GET", "https://example.com/doc/style.css", "Fetch.failRequest", 0, "", ""},
		{"GET", "https://document.renderbox.invalid.example.com/doc/style.css", "Fetch.failRequest", 0, "", ""},
		{"GET", "file:///etc/passwd", "Fetch.failRequest", 0, "", ""},
	} {
		paused(b, "S1", "R-"+tc.url, tc.method, tc.url)
		m := b.Expect("S1", tc.answer)
		var p fulfil
		if err := json.Unmarshal(m.Params, &p); err != nil {
			t.Fatal(err)
		}
		if p.RequestID != "R-"+tc.url {
			t.Errorf("%s %s: answered request %q", tc.method, tc.url, p.RequestID)
		}
		if tc.answer == "Fetch.failRequest" {
			if p.ErrorReason != "AccessDenied" {
				t.Errorf("%s %s: refused with %q, want AccessDenied", tc.method, tc.url, p.ErrorReason)
			}
			continue
		}
		body, _ := base64.StdEncoding.DecodeString(p.Body)
		ct := ""
		for _, h := range p.ResponseHeaders {
			if h["name"] == "Content-Type" {
				ct = h["value"]
			}
		}
		if p.ResponseCode != tc.code || ct != tc.contentType || string(body) != tc.body {
			t.Errorf("%s %s: got %d %q %q, want %d %q %q", tc.method, tc.url, p.ResponseCode, ct, body, tc.code, tc.contentType, tc.body)
		}
	}
	blocked, missing, _ := ic.report()
	wantBlocked := []string{pageURL + "doc/index.html", "https://example.com/doc/style.css",
		"https://document.renderbox.invalid.example.com/doc/style.css", "file:///etc/passwd"}
	if !slices.Equal(blocked, wantBlocked) || !slices.Equal(missing, []string{pageURL + "doc/missing.js"}) {
		t.Fatalf("got blocked %q, missing %q; want %q, %q", blocked, missing, wantBlocked, []string{pageURL + "doc/missing.js"})
	}
}

// A target the page starts is intercepted before it runs: Fetch on its
// own session (a dedicated worker has none, and its page's interception
// holds its requests), the same for the targets it starts, then it is let
// run. One that cannot be intercepted stays paused and fails the job.
// Each set-up waits for Chromium's replies in the handler, while the page's
// requests queue behind it.
func TestInterceptorSetsUpEveryTargetThePageStarts(t *testing.T) {
	ic, b, marks := newTestInterceptor(t)
	attach := func(session, typ string) {
		b.Event("S1", "Target.attachedToTarget", map[string]any{
			"sessionId": session, "targetInfo": map[string]any{"type": typ, "url": pageURL + "w.js"},
		})
	}

	attach("W", "worker")
	paused(b, "S1", "R1", "GET", "https://example.com/")
	b.Fail(b.Expect("W", "Fetch.enable"), cdp.MethodNotFound, "'Fetch.enable' wasn't found")
	b.Reply(b.Expect("W", "Target.setAutoAttach"), nil)
	b.Expect("W", "Runtime.runIfWaitingForDebugger")
	b.Expect("S1", "Fetch.failRequest") // the request paused meanwhile

	attach("F", "iframe")
	m := b.Expect("F", "Fetch.enable")
	if !strings.Contains(string(m.Params), `"urlPattern":"*"`) {
		t.Errorf("Fetch.enable on the frame: %s, want every URL paused", m.Params)
	}
	b.Reply(m, nil)
	m = b.Expect("F", "Target.setAutoAttach")
	if !strings.Contains(string(m.Params), `"waitForDebuggerOnStart":true`) {
		t.Errorf("Target.setAutoAttach on the frame: %s, want its targets paused", m.Params)
	}
	b.Reply(m, nil)
	b.Expect("F", "Runtime.runIfWaitingForDebugger")
	if err := ic.attachErr(); err != nil {
		t.Fatalf("attachErr after two targets set up: %v", err)
	}

	attach("SW", "service_worker")
	b.Fail(b.Expect("SW", "Fetch.enable"), -32000, "Session is detached")
	// Not let run: the next command is the next request's answer.
	paused(b, "S1", "R2", "GET", "https://example.com/")
	b.Expect("S1", "Fetch.failRequest")
	ic.awaitAttached(time.Second)
	err := ic.attachErr()
	if err == nil || !strings.Contains(err.Error(), "a service_worker the page started could not be intercepted") {
		t.Fatalf("attachErr: got %v, want the service worker's", err)
	}
	want := []string{"the page intercepting a worker target", "intercepting a iframe target"}
	if !slices.Equal(*marks, want) {
		t.Errorf("marks: got %q, want %q", *marks, want)
	}
}

// The page's console errors and uncaught exceptions are recorded, the
// rest of its console is not.
func TestInterceptorRecordsConsoleErrors(t *testing.T) {
	ic, b, _ := newTestInterceptor(t)
	b.Event("S1", "Runtime.consoleAPICalled", map[string]any{"type": "log", "args": []any{map[string]any{"value": "hi"}}})
	b.Event("S1", "Runtime.consoleAPICalled", map[string]any{"type": "error", "args": []any{
		map[string]any{"value": "bad"}, map[string]any{"value": 2}, map[string]any{"description": "Error: x"},
	}})
	b.Event("S1", "Runtime.exceptionThrown", map[string]any{"exceptionDetails": map[string]any{
		"text": "Uncaught", "exception": map[string]any{"description": "TypeError: y\n    at z"},
	}})
	loaded := ic.c.Await("S1", "Page.loadEventFired")
	b.Event("S1", "Page.loadEventFired", nil)
	select {
	case <-loaded:
	case <-time.After(cdptest.Timeout):
		t.Fatal("no load event")
	}
	_, _, console := ic.report()
	want := []string{"console.error: bad 2 Error: x", "uncaught: TypeError: y"}
	if !slices.Equal(console, want) {
		t.Fatalf("got %q, want %q", console, want)
	}
}
