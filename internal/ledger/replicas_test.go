//go:build !unit

package ledger_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/jobstate"
)

// TestTwoStoresNeverBothWin is two API replicas on one ledger: two stores,
// each with its own pool, race to end the same jobs, to claim the same
// webhooks and to record the same attempts. Only the database can keep
// them apart, and in every race exactly one wins.
func TestTwoStoresNeverBothWin(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s1 ledger.Store, dsn string) {
		ctx := context.Background()
		s2 := openStore(t, dsn)
		stores := []ledger.Store{s1, s2}
		_, k := newKey(t, s1, "replicas")

		const jobs = 24
		var ids []string
		for i := range jobs {
			j := newJob(t, stores[i%2], ledger.Job{Owner: k.ID, CallbackURL: "https://hooks.example.com/"})
			if i%3 == 0 {
				if ok, err := stores[(i+1)%2].MarkRunning(ctx, j.ID, time.Now()); err != nil || !ok {
					t.Fatalf("MarkRunning: %v, %v", ok, err)
				}
			}
			ids = append(ids, j.ID)
		}

		// Each job: six racers on each store finish it, fail it or cancel it.
		end := time.Now().Add(-time.Second).UTC()
		winners := make([][]jobstate.State, jobs)
		var (
			mu    sync.Mutex
			wg    sync.WaitGroup
			start = make(chan struct{})
		)
		for i, id := range ids {
			for r := range 12 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := stores[r%2]
					<-start
					var (
						won bool
						as  jobstate.State
						err error
					)
					switch r / 2 % 3 {
					case 0:
						as = jobstate.Canceled
						_, err = s.Cancel(ctx, k.ID, id)
						won = err == nil
						if errors.Is(err, ledger.ErrConflict) {
							err = nil
						}
					case 1:
						as = jobstate.Succeeded
						won, err = s.Finish(ctx, id, ledger.FinishOptions{State: as, At: end})
					case 2:
						as = jobstate.Failed
						won, err = s.Finish(ctx, id, ledger.FinishOptions{State: as, ErrorCode: "sandbox_failure", At: end})
					}
					if err != nil {
						t.Errorf("job %s racer %d: %v", id, r, err)
					}
					if won {
						mu.Lock()
						winners[i] = append(winners[i], as)
						mu.Unlock()
					}
				}()
			}
		}
		close(start)
		wg.Wait()
		for i, id := range ids {
			if len(winners[i]) != 1 {
				t.Errorf("job %s: %d winners %v, want exactly 1", id, len(winners[i]), winners[i])
				continue
			}
			if got := state(t, s2, k.ID, id); got.State != winners[i][0] {
				t.Errorf("job %s: state %s, want the winner's %s", id, got.State, winners[i][0])
			}
			if w, err := s1.GetWebhook(ctx, k.ID, id); err != nil || w.State != ledger.WebhookPending || w.Attempts != 0 {
				t.Errorf("job %s: webhook %+v, %v; want one pending, unattempted", id, w, err)
			}
		}

		// Deliverers on both stores claim until nothing is due: every
		// webhook is claimed once.
		t0 := time.Now()
		claims := claimAll(t, stores, 3, t0, time.Minute)
		checkClaimedOnce(t, claims, jobs)
		claimers := map[string]ledger.Store{}
		for _, c := range claims {
			claimers[c.JobID] = c.by
			if c.Attempts != 1 {
				t.Errorf("claim of %s: attempt %d, want 1", c.JobID, c.Attempts)
			}
		}

		// The first claims' leases run out: the other store claims them
		// again, and the first claims' records are refused as stale.
		var again []ledger.WebhookClaim
		for _, s := range stores {
			c, err := s.ClaimWebhooks(ctx, t0.Add(2*time.Minute), time.Minute, jobs)
			if err != nil {
				t.Fatal(err)
			}
			again = append(again, c...)
		}
		if len(again) != jobs {
			t.Fatalf("claims after the leases ran out: got %d, want %d", len(again), jobs)
		}
		for _, c := range again {
			if c.Attempts != 2 {
				t.Errorf("second claim of %s: attempt %d, want 2", c.JobID, c.Attempts)
			}
			if ok, err := claimers[c.JobID].RecordWebhook(ctx, c.JobID, ledger.WebhookAttempt{Attempt: 1, Delivered: true}); ok || err != nil {
				t.Errorf("stale record of %s: got %v, %v; want false, nil", c.JobID, ok, err)
			}
		}

		// Both stores record the live attempt at once: one record lands.
		recorded := map[string]int{}
		for _, c := range again {
			for _, s := range stores {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ok, err := s.RecordWebhook(ctx, c.JobID, ledger.WebhookAttempt{Attempt: 2, Delivered: true})
					if err != nil {
						t.Errorf("RecordWebhook(%s): %v", c.JobID, err)
					}
					if ok {
						mu.Lock()
						recorded[c.JobID]++
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
		for _, id := range ids {
			if recorded[id] != 1 {
				t.Errorf("attempt 2 of %s recorded %d times, want once", id, recorded[id])
			}
		}
	})
}
