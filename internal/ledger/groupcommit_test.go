//go:build !unit

package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/renderbox/renderbox/internal/ledger"
)

// Jobs submitted at once are committed in groups (SQLite) and each still
// gets its own answer: a new job, the job its idempotency key already
// made, its own refusal (an id taken, an owner unknown) without failing
// the others, or its canceled request's error with nothing recorded.
func TestConcurrentCreatesEachGetTheirOwnAnswer(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		ctx := context.Background()
		_, k := newKey(t, s, "group")
		taken := newJob(t, s, ledger.Job{Owner: k.ID})
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		type call struct {
			ctx     context.Context
			job     ledger.Job
			wantErr error // nil: created, or found by its idempotency key
			idem    string
		}
		var calls []call
		for i := range 120 {
			j := ledger.Job{Owner: k.ID, Renderer: "svg-png", InputSHA256: strings.Repeat("cd", 32), InputSize: 1}
			c := call{ctx: ctx}
			switch i % 6 {
			case 1:
				j.ID = taken.ID
				c.wantErr = ledger.ErrConflict
			case 2:
				j.Owner = "key_nobody"
				c.wantErr = ledger.ErrInvalid
			case 3:
				c.idem = fmt.Sprintf("same-%d", i/12) // two calls per key (i%12 is 3 or 9)
				j.IdempotencyKey = c.idem
			case 4:
				c.ctx = canceled
				c.wantErr = context.Canceled
			}
			c.job = j
			calls = append(calls, c)
		}
		type result struct {
			job     ledger.Job
			created bool
			err     error
		}
		results := make([]result, len(calls))
		var wg sync.WaitGroup
		for i, c := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				j, created, err := s.CreateJob(c.ctx, c.job)
				results[i] = result{j, created, err}
			}()
		}
		wg.Wait()
		byIdem := map[string][]result{}
		created := 0
		for i, c := range calls {
			r := results[i]
			switch {
			case c.wantErr != nil:
				if !errors.Is(r.err, c.wantErr) {
					t.Errorf("call %d: err %v, want %v", i, r.err, c.wantErr)
				}
				continue
			case r.err != nil:
				t.Errorf("call %d: %v", i, r.err)
				continue
			}
			if got, err := s.GetJob(ctx, k.ID, r.job.ID); err != nil || got.Renderer != "svg-png" {
				t.Errorf("call %d: job %s not readable after its answer: %v", i, r.job.ID, err)
			}
			if c.idem != "" {
				byIdem[c.idem] = append(byIdem[c.idem], r)
			}
			if r.created {
				created++
			}
		}
		for idem, rs := range byIdem {
			if len(rs) != 2 || rs[0].job.ID != rs[1].job.ID || rs[0].created == rs[1].created {
				var got []string
				for _, r := range rs {
					got = append(got, fmt.Sprintf("%s created=%v", r.job.ID, r.created))
				}
				t.Errorf("idempotency key %s: %v, want one job, created by one call and found by the other", idem, got)
			}
		}
		jobs, _, err := s.ListJobs(ctx, k.ID, ledger.ListOptions{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if created != 50 || len(jobs) != created+1 { // 40 plain, one of each of 10 pairs; and the one made first
			t.Errorf("%d calls created a job and the ledger holds %d, want 50 and 51", created, len(jobs))
		}
	})
}
