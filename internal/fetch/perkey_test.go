package fetch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/egress"
	"github.com/renderbox/renderbox/internal/wire"
)

// Two jobs of one key, each a page asking for several assets at once,
// never have more than -remote-max-per-key fetches in flight between
// them; a job of another key is answered while they wait.
func TestKeysFetchesAreBoundedAcrossItsJobs(t *testing.T) {
	const max = 2
	var inFlight, most atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/b" {
			_, _ = w.Write([]byte("b"))
			return
		}
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		_, _ = w.Write([]byte("a"))
	}))
	defer srv.Close()
	defer close(release) // before srv.Close, which waits for handlers
	c := Config{Enabled: true, Allow: "127.0.0.0/8", MaxPerKey: max, MaxRequests: DefaultMaxRequests, MaxBytes: DefaultMaxBytes}
	f, err := c.Fetcher(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	answers := make(chan wire.FetchAnswer, 8)
	for range 2 { // two jobs of key A, four assets each
		b := Broker{Ctx: ctx, Session: f.SessionOf("key-a")}
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, _ := b.Fetch(wire.FetchRequest{ID: uint32(i), Method: "GET", URL: srv.URL + "/a"})
				answers <- a
			}()
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for inFlight.Load() < max && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	// Key B's page is answered while key A's wait for their slots.
	b := Broker{Ctx: ctx, Session: f.SessionOf("key-b")}
	if a, body := b.Fetch(wire.FetchRequest{ID: 9, Method: "GET", URL: srv.URL + "/b"}); a.Status != 200 || string(body) != "b" {
		t.Errorf("key B's fetch while key A's wait: %+v %q", a, body)
	}
	time.Sleep(100 * time.Millisecond) // room for a fetch past the bound to start
	if n := inFlight.Load(); n != max {
		t.Errorf("key A has %d fetches at the origin, want %d (its bound)", n, max)
	}
	for range 8 {
		release <- struct{}{}
	}
	wg.Wait()
	close(answers)
	for a := range answers {
		if a.Status != 200 {
			t.Errorf("a fetch of key A: %+v", a)
		}
	}
	if m := most.Load(); m != max {
		t.Errorf("key A had at most %d fetches in flight, want %d", m, max)
	}
}

// A fetch waiting for its key's slot ends with its job, recorded.
func TestWaitingForAKeysSlotEndsWithTheJob(t *testing.T) {
	f := New(&egress.Dialer{Policy: egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}, Limits{}, nil)
	f.perKey = NewKeySlots(1)
	f.perKey.TryTake("k") // another job holds the key's one slot
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	s := f.SessionOf("k")
	if _, err := s.Fetch(ctx, Request{URL: "http://127.0.0.1:1/"}, nil); err == nil {
		t.Fatal("a fetch past its key's bound ran")
	}
	if recs := s.Records(); len(recs) != 1 || recs[0].Error == "" {
		t.Errorf("records %+v, want the wait's end recorded", recs)
	}
}
