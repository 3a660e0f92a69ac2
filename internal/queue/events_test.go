package queue

import (
	"context"
	"testing"
	"time"
)

// A Redis that comes back without its data has no event stream and no
// consumer group: the consumer must make them again and go on applying
// results, or every job from then on stays "running" forever.
func TestConsumeSurvivesALostGroup(t *testing.T) {
	q := testQueue(t, 0)
	rdb := q.Redis()
	ctx, cancel := context.WithCancel(context.Background())
	applied := make(chan string, 10)
	done := make(chan error, 1)
	go func() {
		done <- q.Consume(ctx, "api", "test", func(_ context.Context, ev Event) error {
			applied <- ev.JobID
			return nil
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Consume: %v", err)
		}
	}()

	expect := func(job string) {
		t.Helper()
		if err := q.Publish(ctx, Event{JobID: job, State: "succeeded", At: time.Now()}); err != nil {
			t.Fatalf("publishing %s: %v", job, err)
		}
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
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	expect("job_after")
}
