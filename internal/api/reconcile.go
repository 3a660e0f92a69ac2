package api

import (
	"context"
	"time"

	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/jobstate"
)

// Lost jobs. A job is recorded in the ledger before it is queued
// (createJob), so that its id exists before anything can run it; an API
// process that stops in between (killed, its host gone, Redis unreachable
// at that moment) leaves a job the ledger calls queued and the queue does
// not hold. Two things end such a job:
//
//   - the client's retry with the same Idempotency-Key queues it
//     (requeue), which is what a client that saw its request cut does;
//   - otherwise the reconciler fails it once it is LostAfter old, with
//     an error that says to submit it again, and its webhook fires.
//
// The reconciler also ends a job whose task asynq archived with no result
// reported: the worker running it died on its last attempt and asynq's
// recoverer archived the task when its lease ran out. Every replica runs
// it (RunQueue); ending a job twice is refused by the ledger.

// defaultLostAfter is how old an unfinished job must be before the
// reconciler asks the queue about it: far above an intake's own time
// between recording and queueing (milliseconds; seconds for 50 MiB on a
// slow Redis), and above the time a worker's result event takes to be
// applied after asynq archives its task.
const defaultLostAfter = 2 * time.Minute

// reconcileBatch is how many unfinished jobs one of the reconciler's
// reads takes, every reconcileEvery (at most 10 s). A ledger with more
// unfinished jobs is walked over several reads, from its oldest.
const reconcileBatch = 100

func (s *Server) reconcileEvery() time.Duration { return min(10*time.Second, s.LostAfter/4) }

// reconcile checks the next batch of unfinished jobs against the queue,
// ends the ones it lost, and returns where the next batch begins.
func (s *Server) reconcile(ctx context.Context, from ledger.JobMark) (ledger.JobMark, error) {
	now := time.Now()
	jobs, err := s.Ledger.Unfinished(ctx, from, now.Add(-s.LostAfter), reconcileBatch)
	if err != nil {
		return from, err
	}
	for _, j := range jobs {
		w, err := s.Queue.Whereabouts(ctx, j.ID)
		if err != nil {
			return from, err
		}
		var msg string
		switch {
		case w.Where == "":
			msg = "the queue no longer holds this job (the API that accepted it stopped before queueing it, or Redis lost its data); submit it again"
		case w.Where == "archived" && now.Sub(w.Since) >= s.LostAfter:
			msg = "every attempt at this job ended without a result (the worker running it stopped); the last: " + w.LastErr
		default:
			from = ledger.JobMark{CreatedAt: j.CreatedAt, ID: j.ID}
			continue
		}
		changed, err := s.Ledger.Finish(ctx, j.ID, ledger.FinishOptions{State: jobstate.Failed, ErrorCode: "internal", ErrorMessage: msg, At: now})
		if err != nil {
			return from, err
		}
		if changed {
			where := "archived"
			if w.Where == "" {
				where = "none"
			}
			s.metrics.lost.WithLabelValues(where).Inc()
			s.metrics.finished.WithLabelValues(string(jobstate.Failed), "internal").Inc()
			s.Logger.Warn("failed a job the queue lost", "job_id", j.ID, "state", j.State, "queue", where, "accepted", j.CreatedAt)
			s.wakeWebhooks()
			s.jobEnded(ctx, j.ID)
		}
		from = ledger.JobMark{CreatedAt: j.CreatedAt, ID: j.ID}
	}
	if len(jobs) < reconcileBatch {
		from = ledger.JobMark{} // the walk reached the newest: start again from the oldest
	}
	return from, nil
}

// lostAtIntake reports whether job, which an idempotent retry found, is
// queued in the ledger and held nowhere in the queue: its first request
// recorded it and stopped before queueing it. The retry carries the same
// request (the ledger checked), so createJob queues it then. Queueing a
// job twice would be harmless anyway: the job id is the task id, and
// asynq refuses a second.
func (s *Server) lostAtIntake(ctx context.Context, job ledger.Job) (bool, error) {
	if job.State != jobstate.Queued {
		return false, nil
	}
	w, err := s.Queue.Whereabouts(ctx, job.ID)
	return err == nil && w.Where == "", err
}
