//go:build !unit

package ledger_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/jobstate"
)

func TestEndingAJobQueuesItsWebhookOnce(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		ctx := context.Background()
		_, k := newKey(t, s, "hooks")
		_, other := newKey(t, s, "other")
		with := newJob(t, s, ledger.Job{Owner: k.ID, CallbackURL: "https://hooks.example.com/a"})
		canceled := newJob(t, s, ledger.Job{Owner: k.ID, CallbackURL: "https://hooks.example.com/b"})
		without := newJob(t, s, ledger.Job{Owner: k.ID})

		if _, err := s.GetWebhook(ctx, k.ID, with.ID); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("webhook of a live job: %v, want ErrNotFound", err)
		}
		end := time.Now().Add(-time.Second).UTC()
		for _, id := range []string{with.ID, without.ID} {
			if ok, err := s.Finish(ctx, id, ledger.FinishOptions{State: jobstate.Succeeded, At: end}); !ok || err != nil {
				t.Fatalf("Finish: %v %v", ok, err)
			}
		}
		// A second ending changes nothing and queues nothing more.
		if ok, err := s.Finish(ctx, with.ID, ledger.FinishOptions{State: jobstate.Failed, ErrorCode: "internal"}); ok || err != nil {
			t.Fatalf("second Finish: %v %v", ok, err)
		}
		if _, err := s.Cancel(ctx, k.ID, canceled.ID); err != nil {
			t.Fatal(err)
		}
		w, err := s.GetWebhook(ctx, k.ID, with.ID)
		if err != nil || w.State != ledger.WebhookPending || w.URL != "https://hooks.example.com/a" || w.Attempts != 0 || !w.NextAt.Equal(end) {
			t.Errorf("webhook = %+v, %v; want pending, due at the finish time", w, err)
		}
		if _, err := s.GetWebhook(ctx, k.ID, without.ID); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("a job without callback_url got a webhook: %v", err)
		}
		if _, err := s.GetWebhook(ctx, other.ID, with.ID); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("another key sees the webhook: %v", err)
		}
		claims, err := s.ClaimWebhooks(ctx, time.Now(), time.Minute, 10)
		if err != nil || len(claims) != 2 {
			t.Fatalf("claims = %d, %v; want the finished and the canceled job's", len(claims), err)
		}
		states := map[string]jobstate.State{}
		for _, c := range claims {
			states[c.JobID] = c.Job.State
			if c.Attempts != 1 || c.Job.ID != c.JobID || c.Job.Owner != k.ID {
				t.Errorf("claim %+v", c)
			}
		}
		if states[with.ID] != jobstate.Succeeded || states[canceled.ID] != jobstate.Canceled {
			t.Errorf("claimed job states %v", states)
		}
	})
}

func TestWebhookClaimsLeaseRetryAndGiveUp(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		ctx := context.Background()
		_, k := newKey(t, s, "hooks")
		j := newJob(t, s, ledger.Job{Owner: k.ID, CallbackURL: "https://hooks.example.com/"})
		if _, err := s.Finish(ctx, j.ID, ledger.FinishOptions{State: jobstate.Succeeded}); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		claim := func(at time.Time) []ledger.WebhookClaim {
			t.Helper()
			c, err := s.ClaimWebhooks(ctx, at, 30*time.Second, 10)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		if c := claim(t0); len(c) != 1 || c[0].Attempts != 1 {
			t.Fatalf("first claim: %+v", c)
		}
		if c := claim(t0.Add(10 * time.Second)); len(c) != 0 {
			t.Fatalf("claimed again within the lease: %+v", c)
		}
		// The first deliverer died: after the lease another one claims it.
		c := claim(t0.Add(31 * time.Second))
		if len(c) != 1 || c[0].Attempts != 2 {
			t.Fatalf("claim after the lease: %+v", c)
		}
		if ok, err := s.RecordWebhook(ctx, j.ID, ledger.WebhookAttempt{Attempt: 1, Delivered: true}); ok || err != nil {
			t.Errorf("the dead deliverer's late record was applied: %v %v", ok, err)
		}
		retry := t0.Add(time.Hour)
		if ok, err := s.RecordWebhook(ctx, j.ID, ledger.WebhookAttempt{Attempt: 2, Status: 503, Error: "the receiver answered 503", RetryAt: retry}); !ok || err != nil {
			t.Fatalf("record a retry: %v %v", ok, err)
		}
		w, _ := s.GetWebhook(ctx, k.ID, j.ID)
		if w.State != ledger.WebhookPending || w.LastStatus != 503 || w.NextAt.UnixNano() != retry.UnixNano() {
			t.Errorf("after a failed attempt: %+v", w)
		}
		if c := claim(retry.Add(-time.Second)); len(c) != 0 {
			t.Errorf("claimed before its retry time")
		}
		c = claim(retry)
		if len(c) != 1 || c[0].Attempts != 3 {
			t.Fatalf("claim at the retry time: %+v", c)
		}
		if ok, _ := s.RecordWebhook(ctx, j.ID, ledger.WebhookAttempt{Attempt: 3, Error: "connection refused"}); !ok {
			t.Fatal("record giving up")
		}
		w, _ = s.GetWebhook(ctx, k.ID, j.ID)
		if w.State != ledger.WebhookFailed || w.FinishedAt.IsZero() || w.LastStatus != 0 || w.LastError != "connection refused" {
			t.Errorf("after giving up: %+v", w)
		}
		if c := claim(retry.Add(24 * time.Hour)); len(c) != 0 {
			t.Errorf("a failed webhook was claimed: %+v", c)
		}
		if ok, _ := s.RecordWebhook(ctx, j.ID, ledger.WebhookAttempt{Attempt: 3, Delivered: true}); ok {
			t.Error("a finished webhook was changed")
		}
	})
}

func TestConcurrentWebhookClaimsNeverShare(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		ctx := context.Background()
		_, k := newKey(t, s, "hooks")
		const n = 40
		for i := 0; i < n; i++ {
			j := newJob(t, s, ledger.Job{Owner: k.ID, CallbackURL: "https://hooks.example.com/"})
			if _, err := s.Finish(ctx, j.ID, ledger.FinishOptions{State: jobstate.Succeeded}); err != nil {
				t.Fatal(err)
			}
		}
		claims := claimAll(t, []ledger.Store{s}, 4, time.Now(), time.Hour)
		checkClaimedOnce(t, claims, n)
	})
}

// claimed is a webhook claim and the store that made it.
type claimed struct {
	by ledger.Store
	ledger.WebhookClaim
}

// claimAll runs deliverers per store, each claiming up to three webhooks
// due at at until none is left, and returns every claim made.
func claimAll(t *testing.T, stores []ledger.Store, perStore int, at time.Time, lease time.Duration) []claimed {
	t.Helper()
	var (
		mu  sync.Mutex
		all []claimed
		wg  sync.WaitGroup
	)
	for _, s := range stores {
		for range perStore {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					c, err := s.ClaimWebhooks(context.Background(), at, lease, 3)
					if err != nil {
						t.Error(err)
						return
					}
					if len(c) == 0 {
						return
					}
					mu.Lock()
					for _, x := range c {
						all = append(all, claimed{s, x})
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return all
}

// checkClaimedOnce fails unless claims hold n webhooks, each claimed once.
func checkClaimedOnce(t *testing.T, claims []claimed, n int) {
	t.Helper()
	seen := map[string]int{}
	for _, c := range claims {
		seen[c.JobID]++
	}
	if len(seen) != n {
		t.Errorf("%d webhooks claimed, want %d", len(seen), n)
	}
	for id, times := range seen {
		if times != 1 {
			t.Errorf("%s claimed %d times, want once", id, times)
		}
	}
}

// The backlog is the oldest job still queued (not one running or ended)
// and the webhooks waiting for an attempt (not delivered ones).
func TestBacklog(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		ctx := context.Background()
		if b, err := s.Backlog(ctx); err != nil || !b.OldestQueued.IsZero() || b.WebhooksPending != 0 {
			t.Fatalf("empty ledger's backlog = %+v, %v; want none", b, err)
		}
		_, k := newKey(t, s, "backlog")
		first := newJob(t, s, ledger.Job{Owner: k.ID, CallbackURL: "https://hooks.example.com/1"})
		second := newJob(t, s, ledger.Job{Owner: k.ID, CallbackURL: "https://hooks.example.com/2"})
		third := newJob(t, s, ledger.Job{Owner: k.ID})
		b, err := s.Backlog(ctx)
		if err != nil || !b.OldestQueued.Equal(first.CreatedAt) || b.WebhooksPending != 0 {
			t.Fatalf("backlog = %+v, %v; want the first job's %v and no webhook", b, err, first.CreatedAt)
		}
		// The first runs, the second ends: the oldest queued is the third.
		if _, err := s.MarkRunning(ctx, first.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Finish(ctx, second.ID, ledger.FinishOptions{State: jobstate.Succeeded, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if b, err = s.Backlog(ctx); err != nil || !b.OldestQueued.Equal(third.CreatedAt) || b.WebhooksPending != 1 {
			t.Fatalf("backlog = %+v, %v; want the third job's %v and one webhook", b, err, third.CreatedAt)
		}
		claims, err := s.ClaimWebhooks(ctx, time.Now(), time.Minute, 10)
		if err != nil || len(claims) != 1 {
			t.Fatalf("claims = %v, %v", claims, err)
		}
		if ok, err := s.RecordWebhook(ctx, second.ID, ledger.WebhookAttempt{Attempt: claims[0].Attempts, Delivered: true, Status: 204}); !ok || err != nil {
			t.Fatalf("RecordWebhook: %v %v", ok, err)
		}
		if _, err := s.Finish(ctx, third.ID, ledger.FinishOptions{State: jobstate.Failed, ErrorCode: "internal", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if b, err = s.Backlog(ctx); err != nil || !b.OldestQueued.IsZero() || b.WebhooksPending != 0 {
			t.Fatalf("backlog = %+v, %v; want none queued and no webhook pending", b, err)
		}
	})
}

// Unfinished walks the jobs still queued or running, oldest first, from
// a mark, and only those accepted before the bound.
func TestUnfinishedWalksOldestFirst(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		ctx := context.Background()
		_, k := newKey(t, s, "unfinished")
		var jobs []ledger.Job
		for range 5 {
			jobs = append(jobs, newJob(t, s, ledger.Job{Owner: k.ID}))
			time.Sleep(2 * time.Millisecond) // distinct acceptance times
		}
		if _, err := s.MarkRunning(ctx, jobs[1].ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Finish(ctx, jobs[2].ID, ledger.FinishOptions{State: jobstate.Succeeded, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		ids := func(js []ledger.Job) []string {
			var out []string
			for _, j := range js {
				out = append(out, j.ID)
			}
			return out
		}
		walk := func(after ledger.JobMark, before time.Time, limit int) []string {
			t.Helper()
			js, err := s.Unfinished(ctx, after, before, limit)
			if err != nil {
				t.Fatal(err)
			}
			return ids(js)
		}
		later := time.Now().Add(time.Hour)
		want := []string{jobs[0].ID, jobs[1].ID, jobs[3].ID, jobs[4].ID}
		if got := walk(ledger.JobMark{}, later, 100); !slices.Equal(got, want) {
			t.Errorf("all unfinished: %v, want %v", got, want)
		}
		if got := walk(ledger.JobMark{}, jobs[3].CreatedAt, 100); !slices.Equal(got, want[:2]) {
			t.Errorf("accepted before the fourth: %v, want %v", got, want[:2])
		}
		// Two at a time, each from the last one's mark.
		var got []string
		mark := ledger.JobMark{}
		for range 3 {
			page, err := s.Unfinished(ctx, mark, later, 2)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ids(page)...)
			if len(page) > 0 {
				mark = ledger.JobMark{CreatedAt: page[len(page)-1].CreatedAt, ID: page[len(page)-1].ID}
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("walked two at a time: %v, want %v", got, want)
		}
	})
}
