//go:build !unit

package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/jobstate"
)

// A job's way to its end: running, finished, canceled, one terminal state.

// keyed is a store open on an empty ledger and a key in it, whose jobs
// the tests of a job's way make and read.
type keyed struct {
	ledger.Store
	key ledger.Key
}

// newJob records j, a queued job of the key's.
func (s keyed) newJob(t *testing.T, j ledger.Job) ledger.Job {
	t.Helper()
	j.Owner = s.key.ID
	return newJob(t, s.Store, j)
}

// get reads the key's job id.
func (s keyed) get(t *testing.T, id string) ledger.Job {
	t.Helper()
	return state(t, s.Store, s.key.ID, id)
}

// eachKeyed runs t in parallel with the package's other tests, and f in
// a parallel subtest per backend with a keyed store of its own.
func eachKeyed(t *testing.T, f func(t *testing.T, ctx context.Context, s keyed)) {
	t.Helper()
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, _ string) {
		_, k := newKey(t, s, t.Name())
		f(t, context.Background(), keyed{s, k})
	})
}

func TestMarkRunningNeverResurrects(t *testing.T) {
	eachKeyed(t, func(t *testing.T, ctx context.Context, s keyed) {
		j := s.newJob(t, ledger.Job{})
		t1 := time.Date(2025, 2, 1, 10, 0, 0, 0, time.UTC)
		if ok, err := s.MarkRunning(ctx, j.ID, t1); err != nil || !ok {
			t.Fatalf("MarkRunning(queued): got %v, %v; want true", ok, err)
		}
		// A retry after a worker crash: running -> running, another attempt.
		t2 := t1.Add(time.Minute)
		if ok, err := s.MarkRunning(ctx, j.ID, t2); err != nil || !ok {
			t.Fatalf("MarkRunning(running): got %v, %v; want true", ok, err)
		}
		// The second start's event delivered again (a replica applied it
		// and died before acknowledging): the same start, not a third.
		if ok, err := s.MarkRunning(ctx, j.ID, t2); err != nil || ok {
			t.Fatalf("MarkRunning(the same start again): got %v, %v; want false, nil", ok, err)
		}
		got := s.get(t, j.ID)
		if got.State != jobstate.Running || got.Attempts != 2 || !got.StartedAt.Equal(t2) {
			t.Errorf("after two starts, one recorded twice: got %s, attempts %d, started %v; want running, 2, %v", got.State, got.Attempts, got.StartedAt, t2)
		}

		if _, err := s.MarkRunning(ctx, "job_missing", t1); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("MarkRunning(missing): got %v, want ErrNotFound", err)
		}

		terminal := []ledger.FinishOptions{
			{State: jobstate.Succeeded},
			{State: jobstate.Failed, ErrorCode: "timeout", ErrorMessage: "render took longer than 30s"},
			{State: jobstate.Canceled},
		}
		for _, fin := range terminal {
			for _, startFirst := range []bool{false, true} {
				j := s.newJob(t, ledger.Job{})
				if startFirst {
					if ok, err := s.MarkRunning(ctx, j.ID, t1); err != nil || !ok {
						t.Fatalf("MarkRunning: got %v, %v", ok, err)
					}
				}
				if ok, err := s.Finish(ctx, j.ID, fin); err != nil || !ok {
					t.Fatalf("Finish(%s): got %v, %v; want true", fin.State, ok, err)
				}
				before := s.get(t, j.ID)
				if ok, err := s.MarkRunning(ctx, j.ID, t2); err != nil || ok {
					t.Errorf("MarkRunning(%s): got %v, %v; want false, nil", fin.State, ok, err)
				}
				if after := s.get(t, j.ID); !reflect.DeepEqual(after, before) {
					t.Errorf("MarkRunning(%s) changed the job: got %+v, want %+v", fin.State, after, before)
				}
			}
		}
	})
}

// An end applied before its attempt's start — the replica holding the
// running event died unacknowledged, another applied the end — counts the
// attempt from the end's StartedAt; the start delivered again afterwards,
// or the same start given twice, counts nothing more.
func TestFinishCountsAnUnrecordedStart(t *testing.T) {
	eachKeyed(t, func(t *testing.T, ctx context.Context, s keyed) {
		t1 := time.Date(2025, 2, 1, 10, 0, 0, 0, time.UTC)
		t2 := t1.Add(time.Minute)
		for _, tc := range []struct {
			name     string
			starts   []time.Time // MarkRunning before Finish
			started  time.Time   // FinishOptions.StartedAt
			attempts int
		}{
			{"no start recorded", nil, t1, 1},
			{"its start recorded", []time.Time{t1}, t1, 1},
			{"an earlier attempt's start recorded", []time.Time{t1}, t2, 2},
			{"both starts recorded", []time.Time{t1, t2}, t2, 2},
			{"no attempt (canceled while queued)", nil, time.Time{}, 0},
			{"an end that names no start", []time.Time{t1}, time.Time{}, 1},
		} {
			j := s.newJob(t, ledger.Job{})
			for _, at := range tc.starts {
				if ok, err := s.MarkRunning(ctx, j.ID, at); err != nil || !ok {
					t.Fatalf("%s: MarkRunning(%v): got %v, %v", tc.name, at, ok, err)
				}
			}
			if ok, err := s.Finish(ctx, j.ID, ledger.FinishOptions{State: jobstate.Succeeded, StartedAt: tc.started}); err != nil || !ok {
				t.Fatalf("%s: Finish: got %v, %v; want true", tc.name, ok, err)
			}
			if ok, err := s.MarkRunning(ctx, j.ID, tc.started); err != nil || ok {
				t.Errorf("%s: the start delivered after the end: got %v, %v; want false, nil", tc.name, ok, err)
			}
			got := s.get(t, j.ID)
			wantStart := tc.started
			if wantStart.IsZero() && len(tc.starts) > 0 {
				wantStart = tc.starts[len(tc.starts)-1]
			}
			if got.State != jobstate.Succeeded || got.Attempts != tc.attempts || !got.StartedAt.Equal(wantStart) {
				t.Errorf("%s: got %s, attempts %d, started %v; want succeeded, %d, %v", tc.name, got.State, got.Attempts, got.StartedAt, tc.attempts, wantStart)
			}
		}
	})
}

func TestFinish(t *testing.T) {
	eachKeyed(t, func(t *testing.T, ctx context.Context, s keyed) {
		j := s.newJob(t, ledger.Job{})

		bad := []struct {
			name string
			opts ledger.FinishOptions
		}{
			{"not terminal", ledger.FinishOptions{State: jobstate.Running}},
			{"no state", ledger.FinishOptions{}},
			{"failed without code", ledger.FinishOptions{State: jobstate.Failed}},
			{"succeeded with code", ledger.FinishOptions{State: jobstate.Succeeded, ErrorCode: "internal"}},
		}
		for _, tc := range bad {
			if ok, err := s.Finish(ctx, j.ID, tc.opts); ok || !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("Finish(%s): got %v, %v; want false, ErrInvalid", tc.name, ok, err)
			}
		}
		if ok, err := s.Finish(ctx, "job_missing", ledger.FinishOptions{State: jobstate.Succeeded}); ok || !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("Finish(missing): got %v, %v; want false, ErrNotFound", ok, err)
		}

		at := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
		outputs := []ledger.Output{
			{Name: "page-1.png", Size: 2048, SHA256: strings.Repeat("1", 64), MediaType: "image/png"},
			{Name: "page-2.png", Size: 4096, SHA256: strings.Repeat("2", 64), MediaType: "image/png"},
		}
		rootfs := strings.Repeat("9f", 32)
		if ok, err := s.Finish(ctx, j.ID, ledger.FinishOptions{State: jobstate.Succeeded, Outputs: outputs, At: at,
			Worker: "render-1", RootfsDigest: rootfs}); err != nil || !ok {
			t.Fatalf("Finish: got %v, %v; want true", ok, err)
		}
		got := s.get(t, j.ID)
		if got.State != jobstate.Succeeded || !got.FinishedAt.Equal(at) || !reflect.DeepEqual(got.Outputs, outputs) {
			t.Errorf("after Finish: got %s at %v outputs %v; want succeeded at %v outputs %v", got.State, got.FinishedAt, got.Outputs, at, outputs)
		}
		if got.Worker != "render-1" || got.RootfsDigest != rootfs {
			t.Errorf("after Finish: worker %q on rootfs %q; want render-1 on %s", got.Worker, got.RootfsDigest, rootfs)
		}

		// The second finish loses and changes nothing.
		if ok, err := s.Finish(ctx, j.ID, ledger.FinishOptions{State: jobstate.Failed, ErrorCode: "internal"}); err != nil || ok {
			t.Errorf("second Finish: got %v, %v; want false, nil", ok, err)
		}
		if again := s.get(t, j.ID); !reflect.DeepEqual(again, got) {
			t.Errorf("second Finish changed the job: got %+v, want %+v", again, got)
		}
	})
}

// What the API recorded when it took the job (the inputs it fetched) is
// kept when the worker's end brings diagnostics of its own.
func TestFinishKeepsIntakeDiagnostics(t *testing.T) {
	eachKeyed(t, func(t *testing.T, ctx context.Context, s keyed) {
		if _, _, err := s.CreateJob(ctx, ledger.Job{Owner: s.key.ID, Renderer: "x", Diagnostics: json.RawMessage(`[1]`)}); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("CreateJob with diagnostics [1]: %v, want ErrInvalid", err)
		}
		fetched := `{"fetched":[{"url":"https://example.com/a.docx","status":200,"bytes":5,"ms":1}]}`
		for _, end := range []string{"", `{"console_errors":["boom"]}`} {
			j := s.newJob(t, ledger.Job{Diagnostics: json.RawMessage(fetched)})
			if got := s.get(t, j.ID); string(got.Diagnostics) != fetched {
				t.Errorf("queued job's diagnostics %s, want %s", got.Diagnostics, fetched)
			}
			if ok, err := s.Finish(ctx, j.ID, ledger.FinishOptions{State: jobstate.Succeeded, Diagnostics: json.RawMessage(end)}); err != nil || !ok {
				t.Fatalf("Finish: %v %v", ok, err)
			}
			var got map[string]any
			if err := json.Unmarshal(s.get(t, j.ID).Diagnostics, &got); err != nil || got["fetched"] == nil || (end != "" && got["console_errors"] == nil) {
				t.Errorf("after Finish with %q: %v %v", end, got, err)
			}
		}
	})
}

func TestCancel(t *testing.T) {
	eachKeyed(t, func(t *testing.T, ctx context.Context, s keyed) {
		queued := s.newJob(t, ledger.Job{})
		running := s.newJob(t, ledger.Job{})
		if ok, err := s.MarkRunning(ctx, running.ID, time.Now()); err != nil || !ok {
			t.Fatalf("MarkRunning: got %v, %v", ok, err)
		}
		for _, j := range []ledger.Job{queued, running} {
			got, err := s.Cancel(ctx, s.key.ID, j.ID)
			if err != nil {
				t.Fatalf("Cancel(%s): %v", j.ID, err)
			}
			if got.State != jobstate.Canceled || got.ErrorCode != "canceled" || got.FinishedAt.IsZero() {
				t.Errorf("Cancel(%s): got %s, code %q, finished %v; want canceled, canceled, set", j.ID, got.State, got.ErrorCode, got.FinishedAt)
			}
			// Canceling again: the job comes back unchanged, with ErrConflict.
			again, err := s.Cancel(ctx, s.key.ID, j.ID)
			if !errors.Is(err, ledger.ErrConflict) || !reflect.DeepEqual(again, got) {
				t.Errorf("Cancel twice: got %+v, %v; want the canceled job and ErrConflict", again, err)
			}
		}

		done := s.newJob(t, ledger.Job{})
		if ok, err := s.Finish(ctx, done.ID, ledger.FinishOptions{State: jobstate.Succeeded}); err != nil || !ok {
			t.Fatalf("Finish: got %v, %v", ok, err)
		}
		got, err := s.Cancel(ctx, s.key.ID, done.ID)
		if !errors.Is(err, ledger.ErrConflict) || got.State != jobstate.Succeeded {
			t.Errorf("Cancel(succeeded): got %s, %v; want succeeded, ErrConflict", got.State, err)
		}
	})
}

// TestExactlyOneTerminalState races workers finishing a job against clients
// canceling it: exactly one call wins, and the job ends in the winner's state.
func TestExactlyOneTerminalState(t *testing.T) {
	eachKeyed(t, func(t *testing.T, ctx context.Context, s keyed) {
		for _, startFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("running=%v", startFirst), func(t *testing.T) {
				j := s.newJob(t, ledger.Job{})
				if startFirst {
					if ok, err := s.MarkRunning(ctx, j.ID, time.Now()); err != nil || !ok {
						t.Fatalf("MarkRunning: got %v, %v", ok, err)
					}
				}
				const racers = 20
				var (
					start   = make(chan struct{})
					wg      sync.WaitGroup
					mu      sync.Mutex
					winners []jobstate.State
				)
				for i := range racers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						var (
							won  bool
							as   jobstate.State
							err  error
							opts ledger.FinishOptions
						)
						switch i % 4 {
						case 0:
							_, err = s.Cancel(ctx, s.key.ID, j.ID)
							won, as = err == nil, jobstate.Canceled
							if errors.Is(err, ledger.ErrConflict) {
								err = nil
							}
						case 1:
							opts = ledger.FinishOptions{State: jobstate.Succeeded}
						case 2:
							opts = ledger.FinishOptions{State: jobstate.Failed, ErrorCode: "sandbox_failure"}
						case 3:
							opts = ledger.FinishOptions{State: jobstate.Canceled}
						}
						if opts.State != "" {
							won, err = s.Finish(ctx, j.ID, opts)
							as = opts.State
						}
						if err != nil {
							t.Errorf("racer %d: %v", i, err)
						}
						if won {
							mu.Lock()
							winners = append(winners, as)
							mu.Unlock()
						}
					}()
				}
				close(start)
				wg.Wait()
				if len(winners) != 1 {
					t.Fatalf("winners: got %d (%v), want exactly 1", len(winners), winners)
				}
				if got := s.get(t, j.ID); got.State != winners[0] {
					t.Errorf("final state: got %s, want the winner's %s", got.State, winners[0])
				}
			})
		}
	})
}

// TestConcurrentWriters runs writers on two stores over the same file (as
// two processes would) alongside readers: nothing fails with "database is
// locked" and nothing is lost.
func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s1 ledger.Store, dsn string) {
		ctx := context.Background()
		s2 := openStore(t, dsn)
		_, k := newKey(t, s1, "load")

		const writers, perWriter = 8, 25
		var wg sync.WaitGroup
		for w := range writers {
			store := ledger.Store(s1)
			if w%2 == 1 {
				store = s2
			}
			wg.Add(2)
			go func() {
				defer wg.Done()
				for i := range perWriter {
					j, _, err := store.CreateJob(ctx, ledger.Job{Owner: k.ID, Renderer: "dot-svg", InputSHA256: "x"})
					if err != nil {
						t.Errorf("writer %d job %d: CreateJob: %v", w, i, err)
						return
					}
					if _, err := store.MarkRunning(ctx, j.ID, time.Now()); err != nil {
						t.Errorf("writer %d job %d: MarkRunning: %v", w, i, err)
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				for range perWriter {
					if _, _, err := store.ListJobs(ctx, k.ID, ledger.ListOptions{Limit: 5}); err != nil {
						t.Errorf("reader %d: ListJobs: %v", w, err)
						return
					}
				}
			}()
		}
		wg.Wait()

		n := 0
		cursor := ""
		for {
			jobs, next, err := s1.ListJobs(ctx, k.ID, ledger.ListOptions{State: jobstate.Running, Limit: 100, Cursor: cursor})
			if err != nil {
				t.Fatalf("ListJobs: %v", err)
			}
			n += len(jobs)
			if next == "" {
				break
			}
			cursor = next
		}
		if n != writers*perWriter {
			t.Errorf("running jobs: got %d, want %d", n, writers*perWriter)
		}
	})
}

// A drained worker gives its attempt back: the job is queued again, unless
// a later attempt or an end is already recorded; the given-back attempt's
// start, delivered again, does not count twice.
func TestMarkQueued(t *testing.T) {
	eachKeyed(t, func(t *testing.T, ctx context.Context, s keyed) {
		j := s.newJob(t, ledger.Job{})
		t1 := time.Now().UTC().Truncate(time.Microsecond)
		if ok, err := s.MarkQueued(ctx, j.ID, t1); ok || err != nil {
			t.Errorf("MarkQueued of a job never started: %v %v, want false", ok, err)
		}
		if ok, err := s.MarkRunning(ctx, j.ID, t1); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if ok, err := s.MarkQueued(ctx, j.ID, t1.Add(-time.Second)); ok || err != nil || s.get(t, j.ID).State != jobstate.Running {
			t.Errorf("a give-back older than the recorded start: %v %v, state %s; want false, running", ok, err, s.get(t, j.ID).State)
		}
		if ok, err := s.MarkQueued(ctx, j.ID, t1.Add(time.Second)); !ok || err != nil {
			t.Fatalf("MarkQueued: %v %v", ok, err)
		}
		if got := s.get(t, j.ID); got.State != jobstate.Queued || got.Attempts != 1 || !got.StartedAt.Equal(t1) {
			t.Errorf("after the give-back: %s, %d attempts, started %v; want queued, 1, %v", got.State, got.Attempts, got.StartedAt, t1)
		}
		if ok, err := s.MarkRunning(ctx, j.ID, t1); ok || err != nil || s.get(t, j.ID).State != jobstate.Queued {
			t.Errorf("the given-back start again: %v %v, state %s; want false, queued", ok, err, s.get(t, j.ID).State)
		}
		if ok, err := s.MarkRunning(ctx, j.ID, t1.Add(2*time.Second)); !ok || err != nil || s.get(t, j.ID).Attempts != 2 {
			t.Errorf("the next attempt: %v %v, %d attempts; want true, 2", ok, err, s.get(t, j.ID).Attempts)
		}
		if _, err := s.Finish(ctx, j.ID, ledger.FinishOptions{State: jobstate.Succeeded}); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.MarkQueued(ctx, j.ID, time.Now().Add(time.Minute)); ok || err != nil || s.get(t, j.ID).State != jobstate.Succeeded {
			t.Errorf("MarkQueued after the end: %v %v, state %s", ok, err, s.get(t, j.ID).State)
		}
		if _, err := s.MarkQueued(ctx, "job_none", time.Now()); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("an unknown job: %v, want ErrNotFound", err)
		}
	})
}

// The sandbox's mode is shown while the attempt runs, whatever order its
// events are applied in and however often; a late one of an attempt given
// back, superseded or ended changes nothing.
func TestMarkSandbox(t *testing.T) {
	eachKeyed(t, func(t *testing.T, ctx context.Context, s keyed) {
		t1 := time.Date(2025, 2, 1, 10, 0, 0, 0, time.UTC)
		t2 := t1.Add(time.Minute)
		type step struct {
			event string // running, sandbox, queued (given back), succeeded
			at    time.Time
			mode  string
			moved bool // what the Mark* call reports
		}
		for _, tc := range []struct {
			name     string
			steps    []step
			state    jobstate.State
			mode     string
			attempts int
		}{
			{"in order", []step{{"running", t1, "", true}, {"sandbox", t1, "restored", true}}, jobstate.Running, "restored", 1},
			{"delivered twice", []step{{"running", t1, "", true}, {"sandbox", t1, "cold", true}, {"sandbox", t1, "cold", false}, {"running", t1, "", false}}, jobstate.Running, "cold", 1},
			{"the sandbox's event first", []step{{"sandbox", t1, "prebooted", true}, {"running", t1, "", false}}, jobstate.Running, "prebooted", 1},
			{"a pooled sandbox failed, then cold", []step{{"running", t1, "", true}, {"sandbox", t1, "restored", true}, {"sandbox", t1, "cold", true}}, jobstate.Running, "cold", 1},
			{"a retry's sandbox event first", []step{{"running", t1, "", true}, {"sandbox", t1, "cold", true}, {"sandbox", t2, "restored", true}, {"running", t2, "", false}}, jobstate.Running, "restored", 2},
			{"a new attempt has no sandbox yet", []step{{"sandbox", t1, "cold", true}, {"running", t2, "", true}}, jobstate.Running, "", 2},
			{"a late event of an earlier attempt", []step{{"running", t2, "", true}, {"sandbox", t2, "restored", true}, {"sandbox", t1, "cold", false}}, jobstate.Running, "restored", 1},
			{"after the give-back", []step{{"running", t1, "", true}, {"sandbox", t1, "restored", true}, {"queued", t1, "", true}, {"sandbox", t1, "cold", false}}, jobstate.Queued, "", 1},
			{"after the end", []step{{"running", t1, "", true}, {"succeeded", t1, "restored", true}, {"sandbox", t1, "cold", false}}, jobstate.Succeeded, "restored", 1},
		} {
			j := s.newJob(t, ledger.Job{})
			for i, st := range tc.steps {
				var moved bool
				var err error
				switch st.event {
				case "running":
					moved, err = s.MarkRunning(ctx, j.ID, st.at)
				case "sandbox":
					moved, err = s.MarkSandbox(ctx, j.ID, st.at, st.mode)
				case "queued":
					moved, err = s.MarkQueued(ctx, j.ID, st.at)
				case "succeeded":
					moved, err = s.Finish(ctx, j.ID, ledger.FinishOptions{State: jobstate.Succeeded, SandboxMode: st.mode, StartedAt: st.at})
				}
				if err != nil || moved != st.moved {
					t.Errorf("%s: step %d (%s %s): got %v, %v; want %v", tc.name, i, st.event, st.mode, moved, err, st.moved)
				}
			}
			if got := s.get(t, j.ID); got.State != tc.state || got.SandboxMode != tc.mode || got.Attempts != tc.attempts {
				t.Errorf("%s: got %s, mode %q, %d attempts; want %s, %q, %d", tc.name, got.State, got.SandboxMode, got.Attempts, tc.state, tc.mode, tc.attempts)
			}
		}
		if _, err := s.MarkSandbox(ctx, "job_none", t1, "cold"); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("an unknown job: %v, want ErrNotFound", err)
		}
		if _, err := s.MarkSandbox(ctx, s.newJob(t, ledger.Job{}).ID, t1, ""); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("no mode: %v, want ErrInvalid", err)
		}
	})
}
