//go:build !unit

package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/testenv"
)

// wakeServer starts a Redis of the test's own and on it an asynq server
// of concurrency 1, on a client of its own with a Waker of maxWait, as a
// worker serves. It returns a Queue on that Redis, the times the server's
// tasks start at and what stops it.
func wakeServer(t *testing.T, poll, maxWait time.Duration) (*Queue, <-chan time.Time, func()) {
	t.Helper()
	addr := testenv.Redis(t, false)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	wrdb := redis.NewClient(&redis.Options{Addr: addr})
	ctx, cancel := context.WithCancel(context.Background())
	wrdb.AddHook(New(wrdb, time.Hour).ListenWake(ctx, maxWait))
	srv := asynq.NewServerFromRedisClient(wrdb, asynq.Config{
		Concurrency: 1, Queues: map[string]int{QueueName: 1}, TaskCheckInterval: poll, LogLevel: asynq.ErrorLevel,
	})
	started := make(chan time.Time, 10)
	mux := asynq.NewServeMux()
	mux.HandleFunc(TypeRender, func(context.Context, *asynq.Task) error { started <- time.Now(); return nil })
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	return New(rdb, time.Hour), started, func() { cancel(); srv.Shutdown(); wrdb.Close(); rdb.Close() }
}

// A job the dispatcher moves into asynq starts at once on an idle worker,
// however long its poll: with -poll-interval 2s (asynq sleeps 1 to 3 s
// between dequeues that find nothing) each of three jobs starts within
// 500 ms of its dispatch. Without the wake each would wait a second or
// more.
func TestWakeStartsAJobAtOnce(t *testing.T) {
	q, started, stop := wakeServer(t, 2*time.Second, 30*time.Second)
	defer stop()
	time.Sleep(500 * time.Millisecond) // its first dequeue found nothing
	ctx := context.Background()
	for i := range 3 {
		if err := q.Submit(ctx, Payload{JobID: fmt.Sprint("job_", i), Owner: "key_a", Renderer: "svg-png"}, 1, time.Minute, 0); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		if n, err := q.Dispatch(ctx, 1); n != 1 || err != nil {
			t.Fatalf("Dispatch moved %d (%v), want 1", n, err)
		}
		select {
		case at := <-started:
			if d := at.Sub(t0); d > 500*time.Millisecond {
				t.Errorf("job %d started %v after its dispatch, want within 500ms of the wake", i, d)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("job %d did not start within 5s of its dispatch", i)
		}
	}
}

// A task queued without a wake (a retry coming due, a task the recoverer
// gave back) still starts: a held dequeue lets go after the Waker's
// MaxWait, and asynq asks again after its poll.
func TestUnwokenJobStartsAfterTheWait(t *testing.T) {
	q, started, stop := wakeServer(t, 20*time.Millisecond, 300*time.Millisecond)
	defer stop()
	time.Sleep(100 * time.Millisecond)
	t0 := time.Now()
	if err := q.Enqueue(context.Background(), Payload{JobID: "job_unwoken", Renderer: "svg-png"}, time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-started:
		t.Logf("started %v after it was queued", at.Sub(t0))
	case <-time.After(5 * time.Second):
		t.Fatal("a task queued without a wake did not start within 5s (MaxWait 300ms, poll 20ms)")
	}
}
