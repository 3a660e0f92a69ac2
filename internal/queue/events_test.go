//go:build !unit

package queue

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/testenv"
)

// consume runs Consume as name in the background until the test ends.
func consume(t *testing.T, q *Queue, name string, cfg ConsumeConfig, apply func(context.Context, Event) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Consume(ctx, "api", name, cfg, apply) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Consume(%s): %v", name, err)
		}
	})
}

func publish(t *testing.T, q *Queue, job string) {
	t.Helper()
	if err := q.Publish(context.Background(), Event{JobID: job, State: "succeeded", At: time.Now()}); err != nil {
		t.Fatalf("publishing %s: %v", job, err)
	}
}

func pending(t *testing.T, q *Queue) int {
	t.Helper()
	n, err := q.EventsPending(context.Background(), "api")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A Redis that comes back without its data has no event stream and no
// consumer group: the consumer must make them again and go on applying
// results, or every job from then on stays "running" forever.
func TestConsumeSurvivesALostGroup(t *testing.T) {
	q := testQueue(t, 0)
	applied := make(chan string, 10)
	consume(t, q, "test", ConsumeConfig{}, func(_ context.Context, ev Event) error {
		applied <- ev.JobID
		return nil
	})
	expect := func(job string) {
		t.Helper()
		publish(t, q, job)
		select {
		case got := <-applied:
			if got != job {
				t.Fatalf("applied %s, want %s", got, job)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event for %s not applied within 10s", job)
		}
	}
	expect("job_before")
	if err := q.Redis().FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	expect("job_after")
}

// An event whose apply fails is not acknowledged: it stays pending, is
// delivered again after RetryAfter, and is acknowledged once applied.
func TestConsumeRetriesWhatItCouldNotApply(t *testing.T) {
	q := testQueue(t, 0)
	var calls atomic.Int32
	consume(t, q, "only", ConsumeConfig{RetryAfter: 200 * time.Millisecond}, func(context.Context, Event) error {
		if calls.Add(1) < 3 {
			return errors.New("ledger hiccup")
		}
		return nil
	})
	publish(t, q, "job_1")
	testenv.Poll(t, "the first delivery", 5*time.Second, func() bool { return calls.Load() >= 1 })
	if n := pending(t, q); n != 1 {
		t.Fatalf("after a failed apply: %d events pending, want 1 (never acknowledged)", n)
	}
	testenv.Poll(t, "a third delivery and the acknowledgement", 10*time.Second, func() bool { return calls.Load() == 3 && pending(t, q) == 0 })
}

// Two replicas with ledgers of their own (a misconfiguration, but the
// worst case of "job unknown"): the one that does not know the job leaves
// the event to the other, which applies it.
func TestConsumeLeavesAnUnknownJobToAnotherConsumer(t *testing.T) {
	q := testQueue(t, 0)
	cfg := ConsumeConfig{RetryAfter: 200 * time.Millisecond, MaxDeliveries: 5}
	var mu sync.Mutex
	appliedBy := map[string]string{}
	ledger := func(name string, knows map[string]bool) func(context.Context, Event) error {
		return func(_ context.Context, ev Event) error {
			if !knows[ev.JobID] {
				return errors.New("unknown job")
			}
			mu.Lock()
			defer mu.Unlock()
			appliedBy[ev.JobID] += name
			return nil
		}
	}
	consume(t, q, "a", cfg, ledger("a", map[string]bool{"job_a1": true, "job_a2": true}))
	consume(t, q, "b", cfg, ledger("b", map[string]bool{"job_b1": true, "job_b2": true}))
	for _, j := range []string{"job_a1", "job_b1", "job_a2", "job_b2"} {
		publish(t, q, j)
	}
	testenv.Poll(t, "every event applied by the consumer that knows its job", 15*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(appliedBy) == 4 && pending(t, q) == 0
	})
	for j, by := range appliedBy {
		if by != j[4:5] {
			t.Errorf("%s applied by %q, want once by %s", j, by, j[4:5])
		}
	}
	if n, _ := q.DeadLetters(context.Background()); n != 0 {
		t.Errorf("%d events dead-lettered, want none", n)
	}
}

// An event that no consumer can apply is given up after MaxDeliveries:
// moved to the dead-letter stream with its error and acknowledged, and
// so is a malformed entry at once.
func TestConsumeDeadLettersAfterMaxDeliveries(t *testing.T) {
	q := testQueue(t, 0)
	ctx := context.Background()
	var calls atomic.Int32
	var dead sync.Map
	cfg := ConsumeConfig{RetryAfter: 100 * time.Millisecond, MaxDeliveries: 3,
		DeadLettered: func(ev Event, n int64, err error) { dead.Store(ev.JobID, err) }}
	apply := func(context.Context, Event) error { calls.Add(1); return errors.New("job unknown to this ledger") }
	consume(t, q, "a", cfg, apply)
	consume(t, q, "b", cfg, apply)
	publish(t, q, "job_lost")
	if err := q.Redis().XAdd(ctx, &redis.XAddArgs{Stream: EventStream, Values: map[string]any{"event": "{not json"}}).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Poll(t, "both in the dead-letter stream", 15*time.Second, func() bool {
		n, _ := q.DeadLetters(ctx)
		return n == 2 && pending(t, q) == 0
	})
	if n := calls.Load(); n != 3 {
		t.Errorf("apply called %d times, want MaxDeliveries (3)", n)
	}
	msgs, err := q.Redis().XRange(ctx, DeadLetterStream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		t.Logf("dead letter: %v", m.Values)
	}
	if e, ok := dead.Load("job_lost"); !ok || e.(error).Error() != "job unknown to this ledger" {
		t.Errorf("DeadLettered for job_lost: got %v, want apply's last error", e)
	}
	if e, ok := dead.Load(""); !ok || !errors.Is(e.(error), ErrMalformed) {
		t.Errorf("DeadLettered for the malformed entry: got %v, want ErrMalformed", e)
	}
}

// While the ledger is down (Ready fails), a failed event is not counted
// towards the dead-letter bound: it waits, and is applied once the ledger
// is back.
func TestConsumeWaitsOutAnOutage(t *testing.T) {
	q := testQueue(t, 0)
	var down atomic.Bool
	down.Store(true)
	var applied atomic.Int32
	ready := func(context.Context) error {
		if down.Load() {
			return errors.New("connection refused")
		}
		return nil
	}
	consume(t, q, "a", ConsumeConfig{RetryAfter: 100 * time.Millisecond, MaxDeliveries: 2, Ready: ready},
		func(context.Context, Event) error {
			if down.Load() {
				return errors.New("connection refused")
			}
			applied.Add(1)
			return nil
		})
	publish(t, q, "job_1")
	time.Sleep(3 * time.Second) // longer than MaxDeliveries × RetryAfter
	if n, _ := q.DeadLetters(context.Background()); n != 0 || pending(t, q) != 1 {
		t.Fatalf("during the outage: %d dead letters, %d pending; want 0 and 1", n, pending(t, q))
	}
	down.Store(false)
	testenv.Poll(t, "the event applied after the outage", 40*time.Second, func() bool { return applied.Load() == 1 && pending(t, q) == 0 })
}

// readByTheDead publishes job's event and has the consumer "dead" read
// it and never acknowledge it, as an API killed at once would; it returns
// the event's id.
func readByTheDead(t *testing.T, q *Queue, job string) string {
	t.Helper()
	ctx := context.Background()
	if err := q.createGroup(ctx, "api"); err != nil {
		t.Fatal(err)
	}
	publish(t, q, job)
	res, err := q.Redis().XReadGroup(ctx, &redis.XReadGroupArgs{Group: "api", Consumer: "dead", Streams: []string{EventStream, ">"}, Count: 1}).Result()
	if err != nil {
		t.Fatal(err)
	}
	return res[0].Messages[0].ID
}

// A consumer that died holding events (kill -9 of an API) leaves them
// pending; another consumer claims and applies them.
func TestConsumeClaimsADeadConsumersEvents(t *testing.T) {
	q := testQueue(t, 0)
	readByTheDead(t, q, "job_1")
	applied := make(chan string, 1)
	consume(t, q, "alive", ConsumeConfig{RetryAfter: 200 * time.Millisecond}, func(_ context.Context, ev Event) error {
		applied <- ev.JobID
		return nil
	})
	select {
	case j := <-applied:
		if j != "job_1" {
			t.Fatalf("applied %s, want job_1", j)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the dead consumer's event was not claimed within 10s")
	}
	testenv.Poll(t, "its acknowledgement", 5*time.Second, func() bool { return pending(t, q) == 0 })
}

// Every replica hears of a job's end.
func TestWatchEnded(t *testing.T) {
	q := testQueue(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var heard [2]atomic.Bool
	for i := range heard {
		go q.WatchEnded(ctx, func(job string) { heard[i].Store(job == "job_1") })
	}
	// The subscriptions are made asynchronously: publish until both heard.
	testenv.Poll(t, "both watchers hearing job_1", 10*time.Second, func() bool {
		if err := q.PublishEnded(ctx, "job_1"); err != nil {
			t.Fatal(err)
		}
		return heard[0].Load() && heard[1].Load()
	})
}

// An event whose consumers keep dying while applying it (its delivery
// count past twice MaxDeliveries) is given up without another try.
func TestConsumeGivesUpAnAbandonedEvent(t *testing.T) {
	q := testQueue(t, 0)
	ctx := context.Background()
	id := readByTheDead(t, q, "job_poison")
	// As if delivered 7 times to consumers that died.
	if err := q.Redis().Do(ctx, "XCLAIM", EventStream, "api", "dead", 0, id, "RETRYCOUNT", 7).Err(); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	var gaveUp atomic.Value
	consume(t, q, "alive", ConsumeConfig{RetryAfter: 100 * time.Millisecond, MaxDeliveries: 3,
		DeadLettered: func(_ Event, _ int64, err error) { gaveUp.Store(err) }},
		func(context.Context, Event) error { calls.Add(1); return nil })
	testenv.Poll(t, "the event given up", 10*time.Second, func() bool { return gaveUp.Load() != nil })
	if err := gaveUp.Load().(error); !errors.Is(err, ErrAbandoned) {
		t.Errorf("given up with %v, want ErrAbandoned", err)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("apply called %d times, want 0", n)
	}
}
