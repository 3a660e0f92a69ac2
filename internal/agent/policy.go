package agent

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/renderbox/renderbox/internal/agent/cdp"
	"github.com/renderbox/renderbox/internal/wire"
)

// pageURL is where the page appears to come from. Nothing resolves it: the
// agent answers the request itself, and refuses every other one, so the
// page can read only the job's own input.
const pageURL = "https://document.renderbox.invalid/"

// interceptEverything is Fetch.enable's parameters that pause every
// request of a target until the agent answers it.
var interceptEverything = map[string]any{"patterns": []map[string]any{{"urlPattern": "*"}}}

// attachWait bounds how long a page's print waits for the targets it
// started to be attached.
const attachWait = 2 * time.Second

// pagePolicy decides which requests the page may make: a GET of the page
// or of one of the job's files from the page's origin. Nothing else leaves.
type pagePolicy struct {
	site *site
	// broker, when set, is a URL page's: every request is put to the
	// host, which fetches it or refuses (brokered), and url is the page.
	broker *brokerClient
	url    string
}

// answer is what the agent does with one paused request.
type answer struct {
	// fulfil: answered with code, contentType and body; else refused.
	fulfil           bool
	code             int
	contentType      string
	body             []byte
	missing, blocked bool // what the job reports about it
}

// decide answers a request for url by method: the page and the job's files
// from the page's origin (a file the job does not have is a 404, and
// recorded as missing), everything else refused and recorded as blocked.
func (p pagePolicy) decide(method, url string) answer {
	if !strings.HasPrefix(url, pageURL) || method != "GET" {
		return answer{blocked: true}
	}
	body, ct, ok := p.site.lookup(url)
	if !ok {
		return answer{fulfil: true, code: 404, contentType: "text/plain; charset=utf-8",
			body: []byte("not in this job's files\n"), missing: true}
	}
	return answer{fulfil: true, code: 200, contentType: ct, body: body}
}

// interceptor applies a pagePolicy to a page's requests and to those of
// every target the page starts, and keeps what the job reports: the
// requests refused and missing, and the console errors.
type interceptor struct {
	c      *cdp.Client
	policy pagePolicy
	mark   func(string)
	// mu guards what follows: the handlers write, the job reads.
	mu sync.Mutex
	// attaching is closed when the target being set up now, if any, runs;
	// the page is printed after it (or after attachWait).
	attaching                 chan struct{}
	attachFailed              error
	blocked, missing, console []string
	// pageFailed says why a URL page's own document could not be had.
	pageFailed string
}

func newInterceptor(c *cdp.Client, p pagePolicy, mark func(string)) *interceptor {
	return &interceptor{c: c, policy: p, mark: mark}
}

// install has the client's events handled by ic. Requests paused before it
// stay paused until it is installed (prepare enabled their interception).
func (ic *interceptor) install() {
	ic.c.Handle("Fetch.requestPaused", ic.paused)
	ic.c.Handle("Target.attachedToTarget", ic.attached)
	ic.c.Handle("Runtime.consoleAPICalled", ic.consoleCalled)
	ic.c.Handle("Runtime.exceptionThrown", ic.exceptionThrown)
}

// paused answers one paused request as the policy decides. The answer is
// sent without waiting for Chromium's reply: nothing could be done about
// a failure, and the events after it need not wait.
func (ic *interceptor) paused(m cdp.Message) {
	var p struct {
		RequestID string `json:"requestId"`
		Request   struct {
			URL    string `json:"url"`
			Method string `json:"method"`
		} `json:"request"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		return
	}
	if ic.policy.broker != nil {
		// The host's answer takes a round trip to the origin: the
		// events after this one need not wait for it.
		go ic.brokered(m.SessionID, p.RequestID, p.Request.Method, p.Request.URL)
		return
	}
	a := ic.policy.decide(p.Request.Method, p.Request.URL)
	switch {
	case a.missing:
		ic.record(&ic.missing, p.Request.URL)
	case a.blocked:
		ic.record(&ic.blocked, p.Request.URL)
	}
	if !a.fulfil {
		_ = ic.c.Send(m.SessionID, "Fetch.failRequest", map[string]any{"requestId": p.RequestID, "errorReason": "AccessDenied"})
		return
	}
	_ = ic.c.Send(m.SessionID, "Fetch.fulfillRequest", map[string]any{
		"requestId": p.RequestID, "responseCode": a.code, "body": base64.StdEncoding.EncodeToString(a.body),
		"responseHeaders": []map[string]string{
			{"name": "Content-Type", "value": a.contentType},
			{"name": "Cache-Control", "value": "no-store"},
		},
	})
}

// brokered answers a URL page's request with what the host fetched: its
// status, headers and body; a refusal (the host's policy, or a method
// other than GET) fails it and is recorded as blocked with its reason, an
// origin's status of 400 or more is recorded as missing.
func (ic *interceptor) brokered(session, requestID, method, url string) {
	fail := func(reason, why string) {
		ic.record(&ic.blocked, url+" ("+why+")")
		ic.pageFails(url, why)
		_ = ic.c.Send(session, "Fetch.failRequest", map[string]any{"requestId": requestID, "errorReason": reason})
	}
	if method != "GET" {
		fail("AccessDenied", "refused: method "+method)
		return
	}
	if !wire.FetchableURL(url) {
		fail("AccessDenied", "refused: not a URL the host takes")
		return
	}
	a, body, err := ic.policy.broker.fetch(method, url)
	switch {
	case err != nil:
		fail("Failed", "no answer from the host: "+err.Error())
		return
	case a.Refused != "":
		fail("AccessDenied", "refused: "+a.Refused)
		return
	case a.Status == 0:
		fail("ConnectionFailed", "failed: "+a.Error)
		return
	case a.Status >= 400:
		ic.record(&ic.missing, fmt.Sprintf("%s (%d)", url, a.Status))
		ic.pageFails(url, fmt.Sprintf("the origin answered %d", a.Status))
	}
	headers := []map[string]string{{"name": "Cache-Control", "value": "no-store"}}
	for _, h := range a.Headers {
		if wire.BrokeredHeader(h[0]) {
			headers = append(headers, map[string]string{"name": h[0], "value": h[1]})
		}
	}
	_ = ic.c.Send(session, "Fetch.fulfillRequest", map[string]any{
		"requestId": requestID, "responseCode": a.Status, "body": base64.StdEncoding.EncodeToString(body),
		"responseHeaders": headers,
	})
}

// pageFails notes why the page itself could not be had, when url is it.
func (ic *interceptor) pageFails(url, why string) {
	if url != ic.policy.url {
		return
	}
	ic.mu.Lock()
	if ic.pageFailed == "" {
		ic.pageFailed = why
	}
	ic.mu.Unlock()
}

// pageErr is why a URL page's document could not be had, if it could not.
func (ic *interceptor) pageErr() error {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.pageFailed == "" {
		return nil
	}
	return fmt.Errorf("loading %s: %s", wire.Diagnostic(ic.policy.url), ic.pageFailed)
}

// interceptAll makes every target the session starts (workers, out-of-process
// frames, service workers, and theirs in turn) attach paused, with its
// requests intercepted like the page's before it runs: without it they
// would fetch past the interception, held back only by the sandbox's empty
// network.
func interceptAll(c *cdp.Client, session string) error {
	return c.Call(session, "Target.setAutoAttach", map[string]any{
		"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true,
	}, nil)
}

// attached intercepts a newly attached target's requests, then lets it run.
func (ic *interceptor) attached(m cdp.Message) {
	done := make(chan struct{})
	ic.mu.Lock()
	ic.attaching = done
	ic.mu.Unlock()
	defer func() {
		ic.mu.Lock()
		ic.attaching = nil
		ic.mu.Unlock()
		close(done)
	}()
	var p struct {
		SessionID  string `json:"sessionId"`
		TargetInfo struct {
			Type string `json:"type"`
			URL  string `json:"url"`
		} `json:"targetInfo"`
	}
	if json.Unmarshal(m.Params, &p) != nil || p.SessionID == "" {
		return
	}
	err := ic.c.Call(p.SessionID, "Fetch.enable", interceptEverything, nil)
	how := "intercepting"
	var ce *cdp.Error
	if err != nil && p.TargetInfo.Type == "worker" && errors.As(err, &ce) && ce.Code == cdp.MethodNotFound {
		// A dedicated worker has no Fetch domain of its own: its
		// requests are its page's, paused by the page's interception.
		err, how = nil, "the page intercepting"
	}
	if err == nil {
		err = interceptAll(ic.c, p.SessionID)
	}
	if err != nil {
		// Not intercepted: it stays paused, never runs, and the job
		// fails (drive).
		ic.mu.Lock()
		ic.attachFailed = fmt.Errorf("a %s the page started could not be intercepted: %w", p.TargetInfo.Type, err)
		ic.mu.Unlock()
		return
	}
	ic.mark(how + " a " + p.TargetInfo.Type + " target")
	_ = ic.c.Send(p.SessionID, "Runtime.runIfWaitingForDebugger", nil)
}

// awaitAttached waits at most d for the target being attached, if any.
// Handlers run in the order of events, so the targets the page started
// before its load event have been set up by the time drive sees it.
func (ic *interceptor) awaitAttached(d time.Duration) {
	ic.mu.Lock()
	done := ic.attaching
	ic.mu.Unlock()
	if done == nil {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// attachErr is the first target that could not be intercepted, if any.
func (ic *interceptor) attachErr() error {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	return ic.attachFailed
}

func (ic *interceptor) consoleCalled(m cdp.Message) {
	var p struct {
		Type string `json:"type"`
		Args []struct {
			Value       any    `json:"value"`
			Description string `json:"description"`
		} `json:"args"`
	}
	if json.Unmarshal(m.Params, &p) != nil || (p.Type != "error" && p.Type != "assert") {
		return
	}
	var words []string
	for _, a := range p.Args {
		if a.Value != nil {
			words = append(words, fmt.Sprint(a.Value))
		} else {
			words = append(words, a.Description)
		}
	}
	ic.record(&ic.console, "console."+p.Type+": "+strings.Join(words, " "))
}

func (ic *interceptor) exceptionThrown(m cdp.Message) {
	var p struct {
		Details struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		return
	}
	what := p.Details.Exception.Description
	if what == "" {
		what = p.Details.Text
	}
	what, _, _ = strings.Cut(what, "\n")
	ic.record(&ic.console, "uncaught: "+what)
}

// record adds what to list as the host keeps it: the first
// wire.MaxDiagnostics, each a wire.Diagnostic.
func (ic *interceptor) record(list *[]string, what string) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if len(*list) < wire.MaxDiagnostics {
		*list = append(*list, wire.Diagnostic(what))
	}
}

// report returns the requests refused and missing, and the console
// errors, so far.
func (ic *interceptor) report() (blocked, missing, console []string) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	return slices.Clone(ic.blocked), slices.Clone(ic.missing), slices.Clone(ic.console)
}
