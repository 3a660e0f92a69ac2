//go:build !unit

package e2e

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/internal/webhook"
)

// hookReceiver is a client's webhook endpoint on 127.0.0.2, the one
// loopback address the test's API is allowed to deliver to. Each path
// answers with its queue of statuses, then 204.
type hookReceiver struct {
	base     string
	mu       sync.Mutex
	got      map[string][]hookDelivery
	statuses map[string][]int
	redirect string // Location for 3xx answers
}

type hookDelivery struct {
	header http.Header
	body   []byte
}

func newHookReceiver(t *testing.T) *hookReceiver { return newHookReceiverOn(t, "127.0.0.2") }

// newHookReceiverOn is a receiver on host.
func newHookReceiverOn(t *testing.T, host string) *hookReceiver {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("listening on %s: %v", host, err)
	}
	h := &hookReceiver{base: "http://" + ln.Addr().String(), got: map[string][]hookDelivery{}, statuses: map[string][]int{}}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return h
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got[r.URL.Path] = append(h.got[r.URL.Path], hookDelivery{header: r.Header.Clone(), body: body})
	status := http.StatusNoContent
	if q := h.statuses[r.URL.Path]; len(q) > 0 {
		status, h.statuses[r.URL.Path] = q[0], q[1:]
	}
	if status/100 == 3 {
		w.Header().Set("Location", h.redirect)
	}
	w.WriteHeader(status)
}

func (h *hookReceiver) answer(path string, statuses ...int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.statuses[path] = statuses
	return h.base + path
}

// total is how many deliveries the receiver got, on every path.
func (h *hookReceiver) total() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, d := range h.got {
		n += len(d)
	}
	return n
}

func (h *hookReceiver) deliveries(path string) []hookDelivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookDelivery(nil), h.got[path]...)
}

type webhookJSON struct {
	URL        string `json:"url"`
	State      string `json:"state"`
	Attempts   int    `json:"attempts"`
	LastStatus int    `json:"last_status"`
	LastError  string `json:"last_error"`
}

func submitWithCallback(t *testing.T, c *client, key, renderer string, input []byte, callback string, options ...map[string]any) (*response, jobJSON) {
	t.Helper()
	body := map[string]any{"renderer": renderer, "input_base64": base64.StdEncoding.EncodeToString(input), "callback_url": callback}
	if len(options) > 0 {
		body["options"] = options[0]
	}
	b, _ := json.Marshal(body)
	r := c.do("POST", "/v1/jobs", key, "application/json", b, nil)
	var j jobJSON
	if r.Status < 300 {
		r.json(t, &j)
	}
	return r, j
}

// webhookOf waits until job id's webhook reaches a final state and
// returns it.
func webhookOf(t *testing.T, c *client, key, id string) webhookJSON {
	t.Helper()
	var w webhookJSON
	waitFor(t, "job "+id+"'s webhook to be delivered or given up", 90*time.Second, func() bool {
		var j struct {
			Webhook *webhookJSON `json:"webhook"`
		}
		c.do("GET", "/v1/jobs/"+id, key, "", nil, nil).json(t, &j)
		if j.Webhook == nil {
			t.Fatalf("job %s has no webhook record", id)
		}
		w = *j.Webhook
		return w.State == "delivered" || w.State == "failed"
	})
	return w
}

func TestWebhooks(t *testing.T) {
	canary := testenv.Canary(t, "127.0.0.1:0")
	rcv := newHookReceiver(t)
	s := newStack(t, stackOpts{apiArgs: []string{"-webhook-allow", "127.0.0.2/32", "-webhook-retry", "300ms,600ms,900ms"}})
	c := s.client
	alice, bob := s.key("alice"), s.key("bob")
	var aliceSecret, bobSecret struct {
		Secret string `json:"secret"`
	}
	c.do("GET", "/v1/webhook-secret", alice, "", nil, nil).json(t, &aliceSecret)
	c.do("GET", "/v1/webhook-secret", bob, "", nil, nil).json(t, &bobSecret)
	if !strings.HasPrefix(aliceSecret.Secret, "whsec_") || aliceSecret.Secret == bobSecret.Secret {
		t.Fatalf("webhook secrets %q and %q: want two different whsec_ secrets", aliceSecret.Secret, bobSecret.Secret)
	}

	t.Run("signed, retried after a 500, delivered once taken", func(t *testing.T) {
		url := rcv.answer("/ok", http.StatusInternalServerError)
		_, j := submitWithCallback(t, c, alice, "svg-png", samples.SVG(40, 20, 0, 0, 5), url)
		w := webhookOf(t, c, alice, j.ID)
		if w.State != "delivered" || w.Attempts != 2 || w.LastStatus != 204 || w.URL != url {
			t.Fatalf("webhook = %+v, want delivered on the 2nd attempt", w)
		}
		got := rcv.deliveries("/ok")
		if len(got) != 2 {
			t.Fatalf("the receiver got %d requests, want 2", len(got))
		}
		id := got[0].header.Get("webhook-id")
		for i, d := range got {
			h := d.header
			if h.Get("webhook-id") != id {
				t.Errorf("attempt %d has webhook-id %q, want %q on every retry", i+1, h.Get("webhook-id"), id)
			}
			if err := webhook.Verify(aliceSecret.Secret, h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature"), d.body, time.Now()); err != nil {
				t.Errorf("attempt %d does not verify with the key's secret: %v", i+1, err)
			}
			if webhook.Verify(bobSecret.Secret, h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature"), d.body, time.Now()) == nil {
				t.Errorf("attempt %d verifies with another key's secret", i+1)
			}
		}
		var ev struct {
			Type string  `json:"type"`
			Data jobJSON `json:"data"`
		}
		if err := json.Unmarshal(got[1].body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != "job.succeeded" || ev.Data.ID != j.ID || ev.Data.State != "succeeded" || len(ev.Data.Outputs) != 1 {
			t.Errorf("event = %+v, want job.succeeded for %s with its output", ev, j.ID)
		}
	})

	t.Run("failed and canceled jobs are announced", func(t *testing.T) {
		bad := append([]byte("%PDF-1.4\n"), make([]byte, 64)...)
		_, failed := submitWithCallback(t, c, alice, "pdf-png", bad, rcv.answer("/failed"))
		spin := []byte(`<!DOCTYPE html><html><body><script>for(;;){}</script></body></html>`)
		_, spinner := submitWithCallback(t, c, alice, "html-pdf", spin, rcv.answer("/canceled"), map[string]any{"javascript": true})
		if r := c.do("DELETE", "/v1/jobs/"+spinner.ID, alice, "", nil, nil); r.Status != 200 {
			t.Fatalf("cancel: %d %s", r.Status, r.Body)
		}
		for path, want := range map[string]struct{ id, typ string }{"/failed": {failed.ID, "job.failed"}, "/canceled": {spinner.ID, "job.canceled"}} {
			if w := webhookOf(t, c, alice, want.id); w.State != "delivered" {
				t.Errorf("%s: webhook %+v", path, w)
				continue
			}
			var ev struct {
				Type string  `json:"type"`
				Data jobJSON `json:"data"`
			}
			d := rcv.deliveries(path)
			if len(d) != 1 || json.Unmarshal(d[0].body, &ev) != nil || ev.Type != want.typ || ev.Data.ID != want.id || ev.Data.Error == nil {
				t.Errorf("%s: %d deliveries, event %+v; want one %s with its error", path, len(d), ev, want.typ)
			}
		}
	})

	t.Run("retries run out", func(t *testing.T) {
		url := rcv.answer("/down", 503, 503, 503, 503, 503)
		_, j := submitWithCallback(t, c, alice, "dot-svg", samples.DOT("a", "b"), url)
		w := webhookOf(t, c, alice, j.ID)
		if w.State != "failed" || w.Attempts != 4 || w.LastStatus != 503 || !strings.Contains(w.LastError, "503") {
			t.Errorf("webhook = %+v, want failed after 4 attempts (1 + 3 retries) with the 503", w)
		}
		if n := len(rcv.deliveries("/down")); n != 4 {
			t.Errorf("the receiver was called %d times, want 4", n)
		}
	})

	t.Run("non-public addresses are never dialed", func(t *testing.T) {
		_, port, _ := net.SplitHostPort(canary.Addr())
		for _, u := range []string{"http://127.0.0.1:" + port + "/", "http://[::1]:" + port + "/", "http://169.254.169.254/latest/meta-data/",
			"http://10.0.0.1/", "http://[::ffff:127.0.0.1]:" + port + "/", "http://user:pw@127.0.0.2/", "file:///etc/passwd", "gopher://127.0.0.2/",
			"http://[::127.0.0.1]:" + port + "/", "http://[fec0::1]/", "http://[64:ff9b:1::a00:1]/", "http://192.88.99.1/"} {
			r, _ := submitWithCallback(t, c, alice, "svg-png", samples.SVG(10, 10, 0, 0, 2), u)
			if r.Status != 400 || r.problemCode(t) != "invalid_callback_url" {
				t.Errorf("callback_url %s: %d %s, want 400 invalid_callback_url", u, r.Status, tail(r.Body))
			}
		}
		// A name is checked where it resolves: localhost is loopback. The
		// error says so in general words, naming neither the address the
		// API's resolver answered nor the resolver.
		_, j := submitWithCallback(t, c, alice, "svg-png", samples.SVG(10, 10, 0, 0, 2), "http://localhost:"+port+"/hook")
		w := webhookOf(t, c, alice, j.ID)
		if w.State != "failed" || w.Attempts != 1 || !strings.Contains(w.LastError, "address not allowed") ||
			strings.Contains(w.LastError, "127.0.0.1") || strings.Contains(w.LastError, "loopback") {
			t.Errorf("webhook to localhost = %+v, want failed at once with \"address not allowed\" and no address", w)
		}
		// A redirect to the canary is not followed.
		rcv.mu.Lock()
		rcv.redirect = "http://127.0.0.1:" + port + "/"
		rcv.mu.Unlock()
		_, j = submitWithCallback(t, c, alice, "svg-png", samples.SVG(10, 10, 0, 0, 2), rcv.answer("/redirect", 307, 307, 307, 307))
		if w := webhookOf(t, c, alice, j.ID); w.State != "failed" || w.LastStatus != 307 {
			t.Errorf("webhook answered with redirects = %+v, want failed with 307", w)
		}
		if n := canary.Hits(); n != 0 {
			t.Errorf("the canary on 127.0.0.1 saw %d connections", n)
		}
	})
}
