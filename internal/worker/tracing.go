package worker

import (
	"context"
	"time"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/tracing"
)

// tracer is the handler's tracer: the no-op one unless Traces is set.
func (h *Handler) tracer() trace.Tracer { return tracing.Tracer(h.Traces) }

// startAttempt joins the job's trace (the span that queued it), records
// its wait in the queue, from acceptance to now, and starts the attempt's
// span. The attributes name the job, never its options or input.
func (h *Handler) startAttempt(ctx context.Context, p queue.Payload) (context.Context, trace.Span) {
	t := h.tracer()
	ctx = tracing.WithParent(ctx, p.TraceParent)
	now := time.Now()
	job := tracing.JobID.String(p.JobID)
	if !p.Accepted.IsZero() && p.Accepted.Before(now) {
		tracing.Record(ctx, t, tracing.SpanQueueWait, p.Accepted, now, job)
	}
	retry, _ := asynq.GetRetryCount(ctx)
	return t.Start(ctx, tracing.SpanAttempt, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(now),
		trace.WithAttributes(job, tracing.Renderer.String(p.Renderer), tracing.KeyID.String(p.Owner),
			tracing.Worker.String(h.Name), tracing.Attempt.Int(retry+1), tracing.RequestID.String(p.RequestID)))
}

// endSpan ends span, marked failed when err is not nil (its message is
// the worker's own: no document or option is in it).
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func outputBytes(outs []render.Output) int64 {
	var n int64
	for _, o := range outs {
		n += int64(len(o.Data))
	}
	return n
}

// traceExec records the phases of one sandbox's run that began at t0 as
// spans, from the timings the sandbox manager keeps for the phase
// metrics (sandbox.Timings): the manager itself knows nothing of traces.
// A phase that did not happen on the job's path (a pooled sandbox was
// created, booted or restored before the job) has no span.
func (x *Runner) traceExec(ctx context.Context, stage, mode string, t0 time.Time, res *sandbox.Result, err error) {
	if x.Tracer == nil || res == nil {
		return
	}
	attrs := []attribute.KeyValue{tracing.Stage.String(stage), tracing.SandboxMode.String(mode), tracing.SandboxID.String(res.SandboxID)}
	at := t0
	for _, ph := range []struct {
		name string
		d    time.Duration
	}{{tracing.SpanSandboxCreate, res.Timings.Create}, {tracing.SpanSandboxStart, res.Timings.Start}, {tracing.SpanRender, res.Timings.Render}} {
		if ph.d <= 0 {
			continue
		}
		a := attrs
		if ph.name == tracing.SpanRender {
			a = append(a[:len(a):len(a)], tracing.Outcome.String(string(sandbox.OutcomeOf(err))))
		}
		tracing.Record(ctx, x.Tracer, ph.name, at, at.Add(ph.d), a...)
		at = at.Add(ph.d)
	}
}

// span records a span of the runner's from start to now.
func (x *Runner) span(ctx context.Context, name string, start time.Time, attrs ...attribute.KeyValue) {
	if x.Tracer != nil {
		tracing.Record(ctx, x.Tracer, name, start, time.Now(), attrs...)
	}
}
