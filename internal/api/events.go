package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/internal/queue"
)

// RunEvents applies the workers' result events to the ledger until ctx
// ends, and wakes requests waiting on those jobs. Run one per API process;
// several API processes share the work.
func (s *Server) RunEvents(ctx context.Context) error {
	host, _ := os.Hostname()
	return s.Queue.Consume(ctx, "api", host+"-"+strconv.Itoa(os.Getpid()), s.apply)
}

func (s *Server) apply(ctx context.Context, ev queue.Event) error {
	var err error
	switch ev.State {
	case "running":
		_, err = s.Ledger.MarkRunning(ctx, ev.JobID, ev.At)
	case "succeeded", "failed", "canceled":
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
			State: ledger.State(ev.State), ErrorCode: ev.ErrorCode, ErrorMessage: ev.ErrorMessage, Outputs: outs, At: ev.At,
			SandboxMode: ev.SandboxMode, Diagnostics: diag, Worker: ev.Worker, RootfsDigest: ev.RootfsDigest,
		})
		if changed {
			s.metrics.finished.WithLabelValues(ev.State, ev.ErrorCode).Inc()
			s.wakeWebhooks()
		}
	}
	if errors.Is(err, ledger.ErrNotFound) {
		return nil // a job this ledger never had: nothing to do
	}
	if err == nil {
		s.waiters.notify(ev.JobID)
		// A job that started or ended made room in asynq for the next.
		s.wakeDispatcher()
	}
	return err
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
// ledger when an event for it arrives (and every second, in case another
// API process applied it).
func (s *Server) waitFor(r *http.Request, job ledger.Job, d time.Duration) (ledger.Job, bool) {
	ch := s.waiters.add(job.ID)
	defer s.waiters.remove(job.ID, ch)
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(time.Second)
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
