// Package worker is the queue side of a worker host: an asynq handler that
// runs each render job in a fresh sandbox, stores the outputs in Redis and
// reports the result as an event. It maps sandbox outcomes to asynq: only
// sandbox_failure is retried; every deterministic failure is final.
package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/renderbox/renderbox/internal/deliver"
	"github.com/renderbox/renderbox/internal/fetch"
	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/tracing"
	"github.com/renderbox/renderbox/jobstate"
)

// Handler runs render tasks.
type Handler struct {
	Manager *sandbox.Manager
	Queue   *queue.Queue
	Logger  *slog.Logger
	// Name identifies this worker in events.
	Name string
	// RootfsDigest is the digest of the rootfs tree the worker verified at
	// start; each job's events carry it into the job's record.
	RootfsDigest string
	// Metrics, if set, observes each job.
	Metrics *Metrics
	// Pool, if set, hands out pre-booted sandboxes; a job whose family has
	// none ready runs in a cold one.
	Pool *sandbox.Pool
	// Fetcher, if set, fetches what URL pages ask for (fetch.Config);
	// without it a URL job fails.
	Fetcher *fetch.Fetcher
	// Traces, if set, receives each attempt's spans, children of the
	// span that queued the job (Payload.TraceParent; docs/tracing.md).
	Traces trace.TracerProvider
	// Deliver uploads the outputs of jobs that name a destination
	// (deliver.Config); without it such a job fails with delivery_failed.
	Deliver *deliver.Uploader

	mu      sync.Mutex
	running map[string]context.CancelCauseFunc
	// ended are the tasks whose job this handler ended and reported, so
	// returned asynq.SkipRetry; asynqLogger drops the "Retry exhausted"
	// asynq then logs for each, though none was retried.
	ended map[string]bool
}

// maxEnded bounds Handler.ended: a task asynq logged nothing for (its
// lease lost) would otherwise stay in it.
const maxEnded = 10000

// markEnded records that task's job ended and was reported.
func (h *Handler) markEnded(task string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended == nil || len(h.ended) >= maxEnded {
		h.ended = map[string]bool{}
	}
	h.ended[task] = true
}

// takeEnded says whether task's job ended and was reported here, and
// forgets it.
func (h *Handler) takeEnded(task string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	ok := h.ended[task]
	delete(h.ended, task)
	return ok
}

// ErrCanceledByUser is the cause of a job context canceled through the API.
var ErrCanceledByUser = errors.New("job canceled")

// ErrShutdown marks a job interrupted because the worker stopped; it is not
// a failure of the job (see IsFailure).
var ErrShutdown = errors.New("worker shutting down")

// IsFailure tells asynq which errors count against a task's retries: an
// interruption by shutdown does not.
func IsFailure(err error) bool { return !errors.Is(err, ErrShutdown) }

// WatchCancels kills the sandbox of any running job canceled through the
// API; run it for the life of the worker.
func (h *Handler) WatchCancels(ctx context.Context) {
	h.Queue.WatchCancels(ctx, func(job string) {
		h.mu.Lock()
		cancel := h.running[job]
		h.mu.Unlock()
		if cancel != nil {
			cancel(ErrCanceledByUser)
		}
	})
}

func (h *Handler) track(job string, cancel context.CancelCauseFunc) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running == nil {
		h.running = map[string]context.CancelCauseFunc{}
	}
	h.running[job] = cancel
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.running, job)
	}
}

// GiveBack reports every job still running here as queued again: call it
// once asynq's shutdown has returned, which requeues the tasks whose
// handlers outlived -shutdown-timeout.
func (h *Handler) GiveBack() {
	h.mu.Lock()
	jobs := make([]string, 0, len(h.running))
	for job := range h.running {
		jobs = append(jobs, job)
	}
	h.mu.Unlock()
	for _, job := range jobs {
		h.givenBack(h.Logger.With("job_id", job), job)
	}
}

// givenBack says that job's attempt went back to the queue, so that the
// job shows queued now rather than running until another worker takes
// it. The job's context is done: a short one of its own; a failure only
// delays the news.
func (h *Handler) givenBack(log *slog.Logger, job string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := h.Queue.Publish(ctx, queue.Event{JobID: job, State: "queued", At: time.Now(), Worker: h.Name, RootfsDigest: h.RootfsDigest}); err != nil {
		log.Warn("reporting the job queued again", "err", err)
	}
}

// tookSandbox says how the sandbox the attempt took was made, so that the
// job shows it while it runs: a running event that repeats the attempt's
// start (an API that does not know the mode reads it as that start again,
// and changes nothing). One try, bounded: the sandbox waits for it, and
// only the progress shown is lost when it fails — the end carries the
// mode too.
func (h *Handler) tookSandbox(log *slog.Logger, p attempt, mode string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ev := queue.Event{JobID: p.JobID, State: "running", At: p.started, SandboxMode: mode, Worker: h.Name, RootfsDigest: h.RootfsDigest}
	if err := h.Queue.Publish(ctx, ev); err != nil {
		log.Warn("reporting the job's sandbox mode", "sandbox_mode", mode, "err", err)
	}
}

// attempt is one delivery of a job's task.
type attempt struct {
	queue.Payload
	// started is the At of the attempt's running event; zero until it is
	// reported. Its end carries it (queue.Event.StartedAt).
	started time.Time
}

// ProcessTask implements asynq.Handler.
func (h *Handler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	var p attempt
	if err := json.Unmarshal(t.Payload(), &p.Payload); err != nil || p.JobID == "" {
		return fmt.Errorf("decoding task payload: %v: %w", err, asynq.SkipRetry)
	}
	log := h.Logger.With("job_id", p.JobID, "renderer", p.Renderer)
	if p.RequestID != "" {
		// The submitting request's id, as the API logged it: one
		// search finds the job's whole story across both logs.
		log = log.With("request_id", p.RequestID)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer h.track(p.JobID, cancel)()
	ctx, span := h.startAttempt(ctx, p.Payload)
	defer span.End()
	_, take := h.tracer().Start(ctx, tracing.SpanTake)
	defer take.End() // on the ways out before the input is read

	// A job that already ended is not run again: its task comes back when
	// the worker that ended it died before asynq heard (kill -9 between
	// the result and the acknowledgement). Its result is in the stream.
	var ended jobstate.State
	if err := h.withRedis(ctx, log, "checking whether the job ended", func(c context.Context) (err error) {
		ended, err = h.Queue.Ended(c, p.JobID)
		return err
	}); err != nil {
		return err
	}
	if ended != "" {
		log.Warn("the job already ended on an earlier delivery of its task; not running it again", "state", ended)
		return nil
	}
	// A job canceled while queued never runs, even if its task survived.
	var canceled bool
	if err := h.withRedis(ctx, log, "checking the cancel marker", func(c context.Context) (err error) {
		canceled, err = h.Queue.Canceled(c, p.JobID)
		return err
	}); err != nil {
		return err
	}
	if canceled {
		return h.end(ctx, log, p, "canceled", "canceled", "the job was canceled before it ran")
	}
	started := time.Now()
	if err := h.withRedis(ctx, log, "reporting the job running", func(c context.Context) error {
		return h.Queue.Publish(c, queue.Event{JobID: p.JobID, State: "running", At: started, Worker: h.Name, RootfsDigest: h.RootfsDigest})
	}); err != nil {
		return err
	}
	p.started = started
	var input []byte
	var noInput bool
	if err := h.withRedis(ctx, log, "reading the input", func(c context.Context) (err error) {
		input, err = h.Queue.GetBlob(c, queue.InputKey(p.JobID))
		if errors.Is(err, queue.ErrNoBlob) {
			noInput, err = true, nil // an answer, not an outage
		}
		return err
	}); err != nil {
		return err
	}
	take.SetAttributes(tracing.InputBytes.Int(len(input)))
	take.End()
	if noInput {
		return h.end(ctx, log, p, "failed", "internal", "the job's input expired before it ran")
	}
	r, err := render.LookupWithDiagnostics(p.Renderer)
	if err != nil {
		return h.end(ctx, log, p, "failed", "invalid_options", err.Error())
	}
	if err := render.CheckOutputName(p.OutputName); err != nil {
		// The API refuses such a name: this task was altered in Redis.
		return h.end(ctx, log, p, "failed", "internal", "the queued job's "+err.Error())
	}
	// Validated again here: the worker trusts nothing it reads from Redis.
	plan, err := r.PrepareNamed(input, p.InputType, p.Options, p.Limits, p.OutputName)
	if err != nil {
		return h.end(ctx, log, p, "failed", ErrorCode(err), err.Error())
	}
	plan.Job.Input = bytes.NewReader(input)
	defer plan.Close()
	var fetches *fetch.Session
	endFetches := func() {}
	if b := plan.Job.Request.Browser; b != nil && b.URL != "" {
		if h.Fetcher == nil {
			return h.end(ctx, log, p, "failed", "internal", "this worker does not fetch for URL pages; its operator turns that on with "+fetch.Setting)
		}
		fetches = h.Fetcher.SessionOf(p.Owner)
		// The fetches end with the run: none outlives its sandbox, whose
		// own timeout ends a page that waits on them.
		fctx, cancel := context.WithCancel(ctx)
		endFetches = cancel
		scope, header := plan.PageHeaders()
		plan.Job.Broker = fetch.Broker{Ctx: fctx, Session: fetches, UserAgent: b.UserAgent, Scope: scope, Header: header}
	}
	start := time.Now()
	done := h.Metrics.start(p.Accepted)
	run := h.runner()
	run.Took = func(mode string) { h.tookSandbox(log, p, mode) }
	ran := run.Run(ctx, log, r, plan, input)
	endFetches()
	// Reported while the last sandbox is destroyed: a report that waits
	// for Redis must not keep the sandbox alive, nor its teardown the report.
	ret := h.report(ctx, log, p, r, ran, start, fetches)
	ran.Teardown()
	done()
	return ret
}

// runner runs the handler's jobs on its manager and pool.
func (h *Handler) runner() *Runner {
	return &Runner{Manager: h.Manager, Pool: h.Pool, Metrics: h.Metrics, Logger: h.Logger, Tracer: h.tracer()}
}

// report stores a run's accepted outputs and reports its result, and says
// what asynq should do with the task.
func (h *Handler) report(ctx context.Context, log *slog.Logger, p attempt, r *render.Renderer, ran *Ran, start time.Time, fetches *fetch.Session) error {
	res, mode, runErr, steps := ran.Result, ran.Mode, ran.Err, ran.Steps
	outcome := sandbox.OutcomeOf(runErr)
	diag := diagnosticsOf(res)
	if fetches != nil {
		if recs := fetches.Records(); len(recs) > 0 {
			if diag == nil {
				diag = &queue.Diagnostics{}
			}
			diag.Fetched = recs[:min(len(recs), maxFetchedRecords)]
		}
	}
	if steps != nil || ran.Size != nil {
		if diag == nil {
			diag = &queue.Diagnostics{}
		}
		diag.Steps, diag.Size = steps, ran.Size
	}
	h.Metrics.observe(p.Renderer, outcome, mode, res)
	log = log.With("sandbox_id", res.SandboxID, "sandbox_mode", mode, "outcome", outcome, "duration_seconds", time.Since(start).Seconds())
	if res.Response != nil && res.Response.Result.Primed {
		log = log.With("primed", true) // its program was started before the job (wire.WarmExec)
	}

	switch {
	case runErr == nil:
		// Renamed on the host, once the renderer's own names passed.
		accepted, err := r.NameOutputs(ran.Outputs, p.OutputName)
		if err != nil {
			return h.endIn(ctx, log, p, "failed", "internal", "the queued job's "+err.Error(), mode)
		}
		if p.Deliver != nil {
			recs, err := h.deliver(ctx, *p.Deliver, accepted)
			if diag == nil {
				diag = &queue.Diagnostics{}
			}
			diag.Deliveries = recs
			if err != nil {
				// Final: the uploads were retried already, and another
				// render would not change the destination's answer.
				return h.endWith(ctx, log, p, queue.Event{State: "failed", ErrorCode: "delivery_failed", ErrorMessage: err.Error(), SandboxMode: mode, Diagnostics: diag})
			}
		}
		var outs []queue.Output
		sctx, store := h.tracer().Start(ctx, tracing.SpanStore, trace.WithAttributes(tracing.Outputs.Int(len(accepted)), tracing.OutputBytes.Int64(outputBytes(accepted))))
		err = h.withRedis(sctx, log, "storing the outputs", func(c context.Context) (err error) {
			outs, err = h.storeOutputs(c, p.JobID, p.Retention, accepted)
			return err
		})
		endSpan(store, err)
		if err != nil {
			return err
		}
		return h.finish(ctx, log, p, queue.Event{State: "succeeded", Outputs: outs, SandboxMode: mode, Diagnostics: diag})
	case outcome == sandbox.Canceled && errors.Is(context.Cause(ctx), ErrCanceledByUser):
		return h.end(ctx, log, p, "canceled", "canceled", "the job was canceled while it ran")
	case outcome == sandbox.Canceled:
		// The worker is shutting down: asynq requeues the task, and this
		// interruption does not count as one of its retries.
		log.Warn("job interrupted by shutdown; it will run again", "err", runErr)
		h.givenBack(log, p.JobID)
		return fmt.Errorf("%w: %v", ErrShutdown, runErr)
	case outcome.Retryable() && !lastAttempt(ctx):
		log.Warn("sandbox failure; retrying", "err", runErr)
		return runErr
	default:
		msg := runErr.Error()
		var se *sandbox.Error
		if errors.As(runErr, &se) {
			msg = se.Msg
			if se.Stderr != "" && outcome == sandbox.RenderFailed {
				msg += "\n" + tail(se.Stderr, 2048)
			}
		}
		return h.endWith(ctx, log, p, queue.Event{State: "failed", ErrorCode: string(outcome), ErrorMessage: msg, SandboxMode: mode, Diagnostics: diag})
	}
}

// deliver uploads the accepted outputs to the job's destination before
// the job may succeed (docs/api.md, "Delivery to your storage").
func (h *Handler) deliver(ctx context.Context, spec deliver.Spec, accepted []render.Output) ([]deliver.Record, error) {
	if h.Deliver == nil {
		return nil, fmt.Errorf("%w: this worker was started without delivery", deliver.ErrFailed)
	}
	outs := make([]deliver.Output, len(accepted))
	for i, o := range accepted {
		outs[i] = deliver.Output{Name: o.Name, MediaType: o.MediaType, Data: o.Data}
	}
	return h.Deliver.Deliver(ctx, spec, outs)
}

// maxFetchedRecords bounds the fetches a job's diagnostics list.
const maxFetchedRecords = 100

// diagnosticsOf is what the sandbox reported of the page, nil if nothing.
func diagnosticsOf(res *sandbox.Result) *queue.Diagnostics {
	if res == nil || res.Response == nil {
		return nil
	}
	r := &res.Response.Result
	if len(r.Blocked)+len(r.Missing)+len(r.ConsoleErrors) == 0 {
		return nil
	}
	return &queue.Diagnostics{RefusedRequests: r.Blocked, MissingFiles: r.Missing, ConsoleErrors: r.ConsoleErrors}
}

func lastAttempt(ctx context.Context) bool {
	n, ok1 := asynq.GetRetryCount(ctx)
	maxN, ok2 := asynq.GetMaxRetry(ctx)
	return ok1 && ok2 && n >= maxN
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// storeOutputs stores the accepted outputs for retention, the API's
// -retention carried in the task (the queue's default for a task from an
// older API).
func (h *Handler) storeOutputs(ctx context.Context, job string, retention time.Duration, accepted []render.Output) ([]queue.Output, error) {
	var outs []queue.Output
	for _, o := range accepted {
		if err := h.Queue.PutBlobFor(ctx, queue.OutputKey(job, o.Name), o.Data, retention); err != nil {
			return nil, err
		}
		sum := sha256.Sum256(o.Data)
		outs = append(outs, queue.Output{Name: o.Name, Size: int64(len(o.Data)), SHA256: hex.EncodeToString(sum[:]), MediaType: o.MediaType})
	}
	return outs, nil
}

// finish publishes a job's terminal event, waiting out a Redis outage
// while the attempt lives (see withRedis). If it still cannot, it returns
// the error and the task is retried, so that a later attempt reports: a
// terminal state that never reaches the ledger leaves the job "running"
// forever.
func (h *Handler) finish(ctx context.Context, log *slog.Logger, p attempt, ev queue.Event) error {
	ev.JobID, ev.At, ev.StartedAt, ev.Worker, ev.RootfsDigest = p.JobID, time.Now(), p.started, h.Name, h.RootfsDigest
	// The code, never the message: a renderer's stderr may quote the document.
	attempt := trace.SpanFromContext(ctx)
	attempt.SetAttributes(tracing.State.String(string(ev.State)), tracing.ErrorCode.String(ev.ErrorCode), tracing.SandboxMode.String(ev.SandboxMode))
	if ev.State == jobstate.Failed {
		attempt.SetStatus(codes.Error, ev.ErrorCode)
	}
	rctx, span := h.tracer().Start(ctx, tracing.SpanReport, trace.WithAttributes(tracing.State.String(string(ev.State))))
	err := h.withRedis(rctx, log, "reporting the job's result", func(c context.Context) error {
		return h.Queue.PublishEnd(c, ev, p.Retention)
	})
	endSpan(span, err)
	if err != nil {
		log.Error("reporting the job's result", "state", ev.State, "err", err)
		return err
	}
	log.Info("job finished", "state", ev.State, "error_code", ev.ErrorCode)
	return nil
}

// end finishes a job whose outcome no retry can change (bad input, a
// cancel, a deterministic render failure) and tells asynq not to retry it —
// unless the result could not be reported, when a retry is what reports it.
func (h *Handler) end(ctx context.Context, log *slog.Logger, p attempt, state jobstate.State, code, msg string) error {
	return h.endIn(ctx, log, p, state, code, msg, "")
}

// endIn is end for a job that ran in a sandbox made in mode.
func (h *Handler) endIn(ctx context.Context, log *slog.Logger, p attempt, state jobstate.State, code, msg, mode string) error {
	return h.endWith(ctx, log, p, queue.Event{State: state, ErrorCode: code, ErrorMessage: msg, SandboxMode: mode})
}

// endWith is end with the whole terminal event.
func (h *Handler) endWith(ctx context.Context, log *slog.Logger, p attempt, ev queue.Event) error {
	if err := h.finish(ctx, log, p, ev); err != nil {
		return err
	}
	h.markEnded(p.JobID) // the task's id (queue.Enqueue)
	return fmt.Errorf("job %s %s (%s): %w", ev.State, ev.ErrorCode, firstLine(ev.ErrorMessage), asynq.SkipRetry)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// ErrorCode maps a catalogue error to the API's error code.
func ErrorCode(err error) string {
	switch {
	case errors.Is(err, render.ErrUnsupportedInput):
		return "unsupported_input"
	case errors.Is(err, render.ErrInputTooLarge):
		return "input_too_large"
	case errors.Is(err, render.ErrInvalidInput):
		return "invalid_input"
	case errors.Is(err, render.ErrInvalidOptions):
		return "invalid_options"
	case errors.Is(err, render.ErrUnknownRenderer):
		return "unknown_renderer"
	}
	return "internal"
}
