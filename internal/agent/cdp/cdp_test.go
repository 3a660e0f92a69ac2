package cdp_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/agent/cdp"
	"github.com/renderbox/renderbox/internal/agent/cdp/cdptest"
)

// call runs c.Call in a goroutine, so that the test can play the browser.
func call(c *cdp.Client, session, method string, params, out any) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- c.Call(session, method, params, out) }()
	return errc
}

func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(cdptest.Timeout):
		t.Fatalf("%s: nothing within %v", what, cdptest.Timeout)
	}
	var zero T
	return zero
}

func TestCallDecodesTheResultOrTheError(t *testing.T) {
	t.Parallel()
	c, b := cdptest.New(t)

	var out struct {
		TargetID string `json:"targetId"`
	}
	errc := call(c, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &out)
	m := b.Expect("", "Target.createTarget")
	if string(m.Params) != `{"url":"about:blank"}` {
		t.Errorf("params: got %s, want {\"url\":\"about:blank\"}", m.Params)
	}
	b.Reply(m, map[string]any{"targetId": "T1"})
	if err := wait(t, errc, "Target.createTarget"); err != nil || out.TargetID != "T1" {
		t.Fatalf("got %q, %v; want T1, nil", out.TargetID, err)
	}

	errc = call(c, "S1", "Fetch.enable", nil, nil)
	b.Fail(b.Expect("S1", "Fetch.enable"), cdp.MethodNotFound, "'Fetch.enable' wasn't found")
	err := wait(t, errc, "Fetch.enable")
	var ce *cdp.Error
	if !errors.As(err, &ce) || ce.Code != cdp.MethodNotFound {
		t.Fatalf("got %v, want a *cdp.Error with code %d", err, cdp.MethodNotFound)
	}
	if want := "Fetch.enable: 'Fetch.enable' wasn't found (-32601)"; err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
}

// The test of the contract: a handler calls back into the client and
// waits for the reply, which the client must read while the handler runs.
// A client that runs handlers on its reader, or under its lock, hangs here.
func TestHandlerMayCallBackIntoTheClient(t *testing.T) {
	t.Parallel()
	c, b := cdptest.New(t)
	handled := make(chan error, 1)
	c.Handle("Target.attachedToTarget", func(m cdp.Message) {
		handled <- c.Call("S2", "Runtime.runIfWaitingForDebugger", nil, nil)
	})
	b.Event("S1", "Target.attachedToTarget", map[string]any{"sessionId": "S2"})
	b.Reply(b.Expect("S2", "Runtime.runIfWaitingForDebugger"), nil)
	if err := wait(t, handled, "the handler's call"); err != nil {
		t.Fatalf("the handler's call: %v", err)
	}
	// And the client still answers the job's calls.
	errc := call(c, "S1", "Page.navigate", nil, nil)
	b.Reply(b.Expect("S1", "Page.navigate"), nil)
	if err := wait(t, errc, "Page.navigate"); err != nil {
		t.Fatal(err)
	}
}

// Events reach handlers and Await in the order read: the load event is
// seen after the handlers of the events before it have returned.
func TestEventsAreDeliveredInOrder(t *testing.T) {
	t.Parallel()
	c, b := cdptest.New(t)
	var seen []string
	c.Handle("Runtime.consoleAPICalled", func(m cdp.Message) { seen = append(seen, string(m.Params)) })
	loaded := c.Await("S1", "Page.loadEventFired")
	for i := range 50 {
		b.Event("S1", "Runtime.consoleAPICalled", i)
	}
	b.Event("S2", "Page.loadEventFired", nil) // another session's: not awaited
	b.Event("S1", "Page.loadEventFired", nil)
	wait(t, loaded, "the load event")
	if len(seen) != 50 {
		t.Fatalf("%d events handled before the load event, want 50", len(seen))
	}
	for i, s := range seen {
		if want := strconv.Itoa(i); s != want {
			t.Fatalf("event %d: got %s, want %s", i, s, want)
		}
	}
}

// Send does not wait: its reply, when it comes, is dropped, and calls after
// it are answered.
func TestSendDoesNotWaitForItsReply(t *testing.T) {
	t.Parallel()
	c, b := cdptest.New(t)
	if err := c.Send("S1", "Fetch.failRequest", map[string]any{"requestId": "R1"}); err != nil {
		t.Fatal(err)
	}
	sent := b.Expect("S1", "Fetch.failRequest")
	errc := call(c, "S1", "Page.enable", nil, nil)
	enable := b.Expect("S1", "Page.enable")
	b.Reply(sent, nil)
	b.Reply(enable, nil)
	if err := wait(t, errc, "Page.enable"); err != nil {
		t.Fatal(err)
	}
}

// When Chromium goes, a waiting call fails saying so, and Done and Err say
// why.
func TestThePipesEndFailsWaitingCalls(t *testing.T) {
	t.Parallel()
	c, b := cdptest.New(t)
	errc := call(c, "S1", "Page.printToPDF", nil, nil)
	b.Expect("S1", "Page.printToPDF")
	b.Close()
	err := wait(t, errc, "Page.printToPDF")
	if err == nil || !strings.Contains(err.Error(), "chromium closed the DevTools pipe") {
		t.Fatalf("got %v, want the pipe's end", err)
	}
	wait(t, c.Done(), "Done")
	if c.Err() == nil {
		t.Fatal("Err is nil after the pipe ended")
	}
	if err := c.Call("S1", "Page.enable", nil, nil); err == nil {
		t.Fatal("a call after the pipe ended succeeded")
	}
}
