package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/jobstate"
)

// EventConfig says how the result events that this replica could not
// apply are retried (see queue.ConsumeConfig).
type EventConfig struct {
	// RetryAfter: an event left pending is claimed again, by any replica,
	// after this long. Default 5s.
	RetryAfter time.Duration
	// MaxDeliveries: an event not applied after this many deliveries goes
	// to the dead-letter stream. Default 10.
	MaxDeliveries int64
}

// eventGroup is the API replicas' consumer group of the event stream.
const eventGroup = "api"

// RunEvents applies the workers' result events to the ledger until ctx
// ends, and wakes this replica's ?wait= requests when any replica applied
// a job's end. Run one per API process: the replicas share the events
// (one consumer group), and an event one could not apply is left pending
// for another (queue.Consume).
func (s *Server) RunEvents(ctx context.Context) error {
	s.setup()
	go s.Queue.WatchEnded(ctx, s.waiters.notify)
	host, _ := os.Hostname()
	cfg := queue.ConsumeConfig{
		RetryAfter: s.Events.RetryAfter, MaxDeliveries: s.Events.MaxDeliveries,
		Ready: s.Ledger.Ping, Logger: s.Logger,
		DeadLettered: func(_ queue.Event, _ int64, err error) {
			s.metrics.deadLettered.WithLabelValues(eventFailure(err)).Inc()
		},
	}
	// A consumer of its own per RunEvents, even two in one process (the
	// tests' replicas): the consumer leaves what it failed to the others
	// for a while, and two replicas sharing a name would take turns
	// failing and claiming an event one of them cannot apply.
	name := host + "-" + strconv.Itoa(os.Getpid())
	if n := consumers.Add(1); n > 1 {
		name += "-" + strconv.FormatInt(n, 10)
	}
	return s.Queue.Consume(ctx, eventGroup, name, cfg, s.apply)
}

// consumers counts this process's RunEvents, to name each consumer.
var consumers atomic.Int64

// apply records ev in the ledger. It is idempotent — the ledger's updates
// are conditional: a start already recorded, an end after an end, a start
// or a sandbox mode after an end change nothing — because an event can be applied twice: a
// replica that applied it may die before acknowledging it.
//
// An error leaves the event unacknowledged, to be retried by any replica.
// That includes a job the ledger does not know. With one ledger shared by
// every replica (PostgreSQL), as it must be, that never happens in a sound
// deployment (a job is recorded before it is queued): its row was deleted,
// or another deployment shares this Redis. With replicas that each have a
// ledger of their own (a SQLite file each) it is a misconfiguration that
// loses results; it is logged as one and counted
// (renderbox_events_total{outcome="unknown_job"}), and another replica may
// still apply the event before it is given up.
func (s *Server) apply(ctx context.Context, ev queue.Event) error {
	var err error
	terminal := false
	switch ev.State {
	case jobstate.Running:
		if ev.SandboxMode != "" {
			// The attempt took its sandbox; applied before the
			// attempt's start, it records that start too.
			_, err = s.Ledger.MarkSandbox(ctx, ev.JobID, ev.At, ev.SandboxMode)
			break
		}
		_, err = s.Ledger.MarkRunning(ctx, ev.JobID, ev.At)
	case jobstate.Queued:
		// A draining worker gave the attempt back to the queue.
		_, err = s.Ledger.MarkQueued(ctx, ev.JobID, ev.At)
	case jobstate.Succeeded, jobstate.Failed, jobstate.Canceled:
		terminal = true
		var outs []ledger.Output
		for _, o := range ev.Outputs {
			outs = append(outs, ledger.Output{Name: o.Name, Size: o.Size, SHA256: o.SHA256, MediaType: o.MediaType})
		}
		var diag json.RawMessage
		if ev.Diagnostics != nil {
			diag, _ = json.Marshal(ev.Diagnostics)
		}
		var changed bool
		changed, err = s.Ledger.Finish(ctx, ev.JobID, ledger.FinishOptions{
			State: ev.State, ErrorCode: ev.ErrorCode, ErrorMessage: ev.ErrorMessage, Outputs: outs, At: ev.At,
			SandboxMode: ev.SandboxMode, Diagnostics: diag, Worker: ev.Worker, RootfsDigest: ev.RootfsDigest, StartedAt: ev.StartedAt,
		})
		if changed {
			s.metrics.finished.WithLabelValues(string(ev.State), ev.ErrorCode).Inc()
			s.wakeWebhooks()
		}
	default:
		err = fmt.Errorf("event state %q is not one this API knows (is a worker newer than it?): %w", ev.State, ledger.ErrInvalid)
	}
	if err != nil {
		kind := eventFailure(err)
		s.metrics.events.WithLabelValues(kind).Inc()
		if kind == "unknown_job" {
			s.Logger.Error("a result event names a job this replica's ledger does not know; it is left for another replica. "+
				"If the API replicas have ledgers of their own (a SQLite file each), results are being lost: give every replica the same -db, a PostgreSQL URL",
				"job_id", ev.JobID, "state", ev.State, "worker", ev.Worker)
		}
		return fmt.Errorf("applying the %s event of job %s: %w", ev.State, ev.JobID, err)
	}
	s.metrics.events.WithLabelValues("applied").Inc()
	if terminal {
		// Announced even when this apply changed nothing: the replica that
		// changed it may have died before announcing it.
		s.jobEnded(ctx, ev.JobID)
	}
	// A job that started or ended made room in asynq for the next.
	s.wakeDispatcher()
	return nil
}

// eventFailure names the kind of an apply error, for metrics.
func eventFailure(err error) string {
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return "unknown_job"
	case errors.Is(err, ledger.ErrInvalid):
		return "invalid"
	case errors.Is(err, queue.ErrMalformed):
		return "malformed"
	case errors.Is(err, queue.ErrAbandoned):
		return "abandoned"
	}
	return "error"
}

// jobEnded wakes the ?wait= requests for job on this replica and, through
// Redis, on every other. A lost notice delays a waiter by one poll at
// most (waitFor).
func (s *Server) jobEnded(ctx context.Context, job string) {
	s.waiters.notify(job)
	if err := s.Queue.PublishEnded(ctx, job); err != nil {
		s.Logger.Warn("announcing a job's end to the other replicas", "job_id", job, "err", err)
	}
}

// waiters wake requests blocked in ?wait= when their job changes.
type waiters struct {
	mu sync.Mutex
	m  map[string][]chan struct{}
}

func newWaiters() *waiters { return &waiters{m: map[string][]chan struct{}{}} }

func (w *waiters) add(job string) chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{}, 1)
	w.m[job] = append(w.m[job], ch)
	return ch
}

func (w *waiters) remove(job string, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.m[job]
	for i, c := range l {
		if c == ch {
			l = append(l[:i], l[i+1:]...)
			break
		}
	}
	if len(l) == 0 {
		delete(w.m, job)
	} else {
		w.m[job] = l
	}
}

func (w *waiters) notify(job string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.m[job] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// waitFor waits up to d for job to reach a terminal state, re-reading the
// ledger — the truth every replica shares — when any replica announces
// that the job ended, and every waitPoll in case a notice was lost.
func (s *Server) waitFor(r *http.Request, job ledger.Job, d time.Duration) (ledger.Job, bool) {
	ch := s.waiters.add(job.ID)
	defer s.waiters.remove(job.ID, ch)
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(s.waitPoll)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return job, false
		case <-deadline.C:
			return job, false
		case <-ch:
		case <-tick.C:
		}
		j, err := s.Ledger.GetJob(r.Context(), job.Owner, job.ID)
		if err != nil {
			return job, false
		}
		job = j
		if job.State.Terminal() {
			return job, true
		}
	}
}
