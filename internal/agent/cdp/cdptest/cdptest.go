// Package cdptest is a scripted stand-in for Chromium's end of the
// DevTools pipe, for tests of cdp and of what drives it: the test reads
// the commands the client sent and writes the replies and events it
// chooses, framed as Chromium frames them (JSON, each ended by a NUL).
package cdptest

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/agent/cdp"
)

// Timeout bounds every wait of a test on the client.
const Timeout = 5 * time.Second

// Browser is the far end of a pair of pipes.
type Browser struct {
	t    testing.TB
	cmds chan cdp.Message
	w    *os.File
}

// New returns a client and the Browser at its other end; both pipes close
// when the test ends.
func New(t testing.TB) (*cdp.Client, *Browser) {
	t.Helper()
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	replyR, replyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	b := &Browser{t: t, cmds: make(chan cdp.Message, 64), w: replyW}
	go func() {
		defer close(b.cmds)
		br := bufio.NewReader(cmdR)
		for {
			line, err := br.ReadBytes(0)
			if err != nil {
				return
			}
			var m cdp.Message
			if json.Unmarshal(line[:len(line)-1], &m) != nil {
				return
			}
			b.cmds <- m
		}
	}()
	c := cdp.New(cmdW, replyR)
	t.Cleanup(func() {
		replyW.Close()
		cmdR.Close()
		cmdW.Close()
	})
	return c, b
}

// Next is the next command the client sent; the test fails if none comes
// within Timeout.
func (b *Browser) Next() cdp.Message {
	b.t.Helper()
	select {
	case m, ok := <-b.cmds:
		if !ok {
			b.t.Fatal("the client's command pipe closed")
		}
		return m
	case <-time.After(Timeout):
		b.t.Fatal("no command from the client")
	}
	return cdp.Message{}
}

// Expect is Next, which must be method on session.
func (b *Browser) Expect(session, method string) cdp.Message {
	b.t.Helper()
	m := b.Next()
	if m.Method != method || m.SessionID != session {
		b.t.Fatalf("got command %s on session %q (params %s), want %s on %q", m.Method, m.SessionID, m.Params, method, session)
	}
	return m
}

// Reply answers command m with result (nil: an empty object).
func (b *Browser) Reply(m cdp.Message, result any) {
	b.t.Helper()
	if result == nil {
		result = map[string]any{}
	}
	b.write(map[string]any{"id": m.ID, "sessionId": m.SessionID, "result": result})
}

// Fail answers command m with an error.
func (b *Browser) Fail(m cdp.Message, code int, message string) {
	b.t.Helper()
	b.write(map[string]any{"id": m.ID, "sessionId": m.SessionID, "error": map[string]any{"code": code, "message": message}})
}

// Event sends event method on session.
func (b *Browser) Event(session, method string, params any) {
	b.t.Helper()
	b.write(map[string]any{"sessionId": session, "method": method, "params": params})
}

// Close ends the pipe to the client, as Chromium's exit does.
func (b *Browser) Close() { b.w.Close() }

func (b *Browser) write(v any) {
	b.t.Helper()
	p, err := json.Marshal(v)
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := b.w.Write(append(p, 0)); err != nil {
		b.t.Fatalf("writing to the client: %v", err)
	}
}
