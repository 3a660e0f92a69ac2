//go:build !unit

package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/jobstate"
)

// strangerLedger is a replica's ledger that does not know the jobs it is
// told of (a replica with a ledger of its own) or fails writing them: a
// fake only to force those failures, over a real store for the rest.
type strangerLedger struct {
	ledger.Store
	err error // what MarkRunning and Finish return
}

func (l strangerLedger) MarkRunning(context.Context, string, time.Time) (bool, error) {
	return false, fmt.Errorf("mark running: %w", l.err)
}

func (l strangerLedger) Finish(context.Context, string, ledger.FinishOptions) (bool, error) {
	return false, fmt.Errorf("finish: %w", l.err)
}

// timedLedger records when Finish changed a job.
type timedLedger struct {
	ledger.Store
	finished atomic.Int64 // unix nanoseconds
}

func (l *timedLedger) Finish(ctx context.Context, id string, o ledger.FinishOptions) (bool, error) {
	ok, err := l.Store.Finish(ctx, id, o)
	if ok {
		l.finished.Store(time.Now().UnixNano())
	}
	return ok, err
}

func openLedger(t *testing.T) ledger.Store {
	t.Helper()
	s, err := ledger.OpenStore(context.Background(), filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newQueue is a queue on a private Redis.
func newQueue(t *testing.T) *queue.Queue {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(t, false)})
	t.Cleanup(func() { rdb.Close() })
	return queue.New(rdb, 0)
}

func newKey(t *testing.T, store ledger.Store) (string, ledger.Key) {
	t.Helper()
	secret, key, err := store.CreateKey(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	return secret, key
}

// runEvents runs s's event consumer until the test ends.
func runEvents(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.RunEvents(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunEvents: %v", err)
		}
	})
}

// counterValue reads a counter.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}

// A replica that cannot apply an event — its ledger does not know the
// job, or fails — never acknowledges it: it stays pending, is counted,
// and after MaxDeliveries goes to the dead-letter stream, counted again.
func TestEventNotAppliedIsNotAcknowledged(t *testing.T) {
	for _, c := range []struct {
		err     error
		outcome string
	}{
		{ledger.ErrNotFound, "unknown_job"},
		{errors.New("disk I/O error"), "error"},
	} {
		t.Run(c.outcome, func(t *testing.T) {
			q := newQueue(t)
			s := &Server{Ledger: strangerLedger{Store: openLedger(t), err: c.err}, Queue: q,
				Events: EventConfig{RetryAfter: 300 * time.Millisecond, MaxDeliveries: 3}}
			s.setup()
			runEvents(t, s)
			ctx := context.Background()
			if err := q.Publish(ctx, queue.Event{JobID: "job_elsewhere", State: "succeeded", At: time.Now()}); err != nil {
				t.Fatal(err)
			}
			count := func() float64 { return counterValue(s.metrics.events.WithLabelValues(c.outcome)) }
			testenv.Poll(t, "the first failed apply", 5*time.Second, func() bool { return count() >= 1 })
			if n, err := q.EventsPending(ctx, eventGroup); err != nil || n != 1 {
				t.Fatalf("after a failed apply: %d pending (%v), want 1: the event must not be acknowledged", n, err)
			}
			testenv.Poll(t, "the event dead-lettered after 3 deliveries", 10*time.Second, func() bool {
				n, _ := q.DeadLetters(ctx)
				return n == 1
			})
			if got := count(); got != 3 {
				t.Errorf("renderbox_events_total{outcome=%q}: got %v, want 3 (one per delivery)", c.outcome, got)
			}
			if got := counterValue(s.metrics.deadLettered.WithLabelValues(c.outcome)); got != 1 {
				t.Errorf("renderbox_events_dead_lettered_total{reason=%q}: got %v, want 1", c.outcome, got)
			}
			if n, _ := q.EventsPending(ctx, eventGroup); n != 0 {
				t.Errorf("after the dead letter: %d pending, want 0", n)
			}
		})
	}
}

// Two replicas on one ledger: a request waiting (?wait=) on replica B
// for a job whose result replica A applied wakes within ~100ms, through
// Redis, not through its fallback poll (made longer than the test here).
// B cannot apply events itself, so any event it reads is left to A.
func TestWaitWakesOnAnotherReplica(t *testing.T) {
	q, store := newQueue(t), openLedger(t)
	ctx := context.Background()
	secret, key := newKey(t, store)
	events := EventConfig{RetryAfter: 200 * time.Millisecond}
	shared := &timedLedger{Store: store}
	a := &Server{Ledger: shared, Queue: q, Events: events}
	b := &Server{Ledger: strangerLedger{Store: store, err: ledger.ErrNotFound}, Queue: q, Events: events, waitPoll: time.Minute}
	srvB := httptest.NewServer(b.Handler())
	defer srvB.Close()
	runEvents(t, a)
	runEvents(t, b)

	for i := range 5 {
		job, _, err := store.CreateJob(ctx, ledger.Job{Owner: key.ID, Renderer: "svg-png"})
		if err != nil {
			t.Fatal(err)
		}
		type answer struct {
			status int
			state  string
			at     time.Time
			err    error
		}
		got := make(chan answer, 1)
		go func() {
			req, _ := http.NewRequest("GET", srvB.URL+"/v1/jobs/"+job.ID+"?wait=20", nil)
			req.Header.Set("Authorization", "Bearer "+secret)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				got <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			var v struct {
				State string `json:"state"`
			}
			err = json.NewDecoder(resp.Body).Decode(&v)
			got <- answer{resp.StatusCode, v.State, time.Now(), err}
		}()
		time.Sleep(200 * time.Millisecond) // the request is waiting
		if err := a.Queue.Publish(ctx, queue.Event{JobID: job.ID, State: "succeeded", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-got:
			if r.err != nil || r.status != 200 || r.state != "succeeded" {
				t.Fatalf("job %d: GET ?wait=20 on B: %d %s %v, want 200 succeeded", i, r.status, r.state, r.err)
			}
			lag := r.at.Sub(time.Unix(0, shared.finished.Load()))
			t.Logf("job %d: B answered %v after A applied the result", i, lag)
			if lag > 500*time.Millisecond {
				t.Errorf("job %d: B answered %v after A applied the result, want ~100ms (a notice, not the poll)", i, lag)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("job %d: B's ?wait= did not return within 15s of the result", i)
		}
	}
}

// Applying is idempotent whatever the order: events delivered twice (a
// replica applied them and died before acknowledging) and out of order
// (a start retried after the end was applied) leave the job as one
// delivery of each, in order, would.
func TestApplyIsIdempotent(t *testing.T) {
	q, store := newQueue(t), openLedger(t)
	ctx := context.Background()
	_, key := newKey(t, store)
	s := &Server{Ledger: store, Queue: q}
	s.setup()
	job, _, err := store.CreateJob(ctx, ledger.Job{Owner: key.ID, Renderer: "svg-png"})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Truncate(time.Microsecond)
	running := queue.Event{JobID: job.ID, State: "running", At: t0}
	done := queue.Event{JobID: job.ID, State: "succeeded", At: t0.Add(time.Second),
		Outputs: []queue.Output{{Name: "out.png", Size: 3, SHA256: "ab", MediaType: "image/png"}}}
	failed := queue.Event{JobID: job.ID, State: "failed", ErrorCode: "timeout", At: t0.Add(2 * time.Second)}
	for i, ev := range []queue.Event{running, running, done, running, done, failed} {
		if err := s.apply(ctx, ev); err != nil {
			t.Fatalf("event %d (%s): %v", i, ev.State, err)
		}
	}
	got, err := store.GetJob(ctx, key.ID, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != jobstate.Succeeded || got.Attempts != 1 || !got.StartedAt.Equal(t0) || !got.FinishedAt.Equal(done.At) || len(got.Outputs) != 1 {
		t.Errorf("got %s, %d attempts, started %v, finished %v, %d outputs; want succeeded, 1, %v, %v, 1",
			got.State, got.Attempts, got.StartedAt, got.FinishedAt, len(got.Outputs), t0, done.At)
	}
	if n := counterValue(s.metrics.finished.WithLabelValues("succeeded", "")); n != 1 {
		t.Errorf("renderbox_jobs_finished_total{state=succeeded}: got %v, want 1", n)
	}
	if n := counterValue(s.metrics.events.WithLabelValues("applied")); n != 6 {
		t.Errorf("renderbox_events_total{outcome=applied}: got %v, want 6 (a no-op is applied too: acknowledged)", n)
	}
}

// The job shows how its sandbox was made while it runs, once the worker
// says it took one, whether that event comes before the attempt's start
// or after it, once or twice; a late one after the end changes nothing.
func TestSandboxModeShownWhileRunning(t *testing.T) {
	q, store := newQueue(t), openLedger(t)
	ctx := context.Background()
	secret, key := newKey(t, store)
	s := &Server{Ledger: store, Queue: q}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	view := func(id string) (v struct {
		State       string `json:"state"`
		Attempts    int    `json:"attempts"`
		SandboxMode string `json:"sandbox_mode"`
	}) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/v1/jobs/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /v1/jobs/%s: %d %v", id, resp.StatusCode, err)
		}
		return v
	}
	t0 := time.Now().Truncate(time.Microsecond)
	for _, order := range []string{"start first", "sandbox first"} {
		job, _, err := store.CreateJob(ctx, ledger.Job{Owner: key.ID, Renderer: "html-pdf"})
		if err != nil {
			t.Fatal(err)
		}
		running := queue.Event{JobID: job.ID, State: "running", At: t0}
		took := queue.Event{JobID: job.ID, State: "running", At: t0, SandboxMode: "restored"}
		events := []queue.Event{running, took, took}
		if order == "sandbox first" {
			events = []queue.Event{took, running, took}
		}
		for i, ev := range events {
			if err := s.apply(ctx, ev); err != nil {
				t.Fatalf("%s: event %d: %v", order, i, err)
			}
			if v := view(job.ID); v.State != "running" || i > 0 && v.SandboxMode != "restored" {
				t.Errorf("%s: after event %d: %+v, want running (restored once the sandbox's event is in)", order, i, v)
			}
		}
		if v := view(job.ID); v.Attempts != 1 || v.SandboxMode != "restored" {
			t.Errorf("%s: %+v, want 1 attempt, restored", order, v)
		}
		end := queue.Event{JobID: job.ID, State: "succeeded", At: t0.Add(time.Second), StartedAt: t0, SandboxMode: "restored"}
		late := queue.Event{JobID: job.ID, State: "running", At: t0, SandboxMode: "cold"}
		for _, ev := range []queue.Event{end, late} {
			if err := s.apply(ctx, ev); err != nil {
				t.Fatal(err)
			}
		}
		if v := view(job.ID); v.State != "succeeded" || v.SandboxMode != "restored" || v.Attempts != 1 {
			t.Errorf("%s: after the end and a late sandbox event: %+v, want succeeded, restored, 1 attempt", order, v)
		}
	}
}
