package worker

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/tracing"
)

// An attempt joins the trace of the span that queued the job, with its
// wait in the queue from the job's acceptance; a sandbox's phases become
// spans laid end to end from its timings, and a phase that did not happen
// on the job's path has none.
func TestAttemptSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	h := &Handler{Name: "w1", Traces: tp}
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	accepted := time.Now().Add(-3 * time.Second)
	ctx, span := h.startAttempt(context.Background(), queue.Payload{JobID: "job_1", Owner: "key_1", Renderer: "svg-png", Accepted: accepted, TraceParent: parent})
	t0 := time.Now()
	h.runner().traceExec(ctx, "svg-png", sandbox.ModeCold, t0, &sandbox.Result{SandboxID: "sb1", Timings: sandbox.Timings{Create: 40 * time.Millisecond, Start: 60 * time.Millisecond, Render: 200 * time.Millisecond}}, nil)
	h.runner().traceExec(ctx, "svg-png", sandbox.ModeRestored, t0, &sandbox.Result{SandboxID: "sb2", Timings: sandbox.Timings{Render: 100 * time.Millisecond}}, nil)
	span.End()

	got := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		got[s.Name()] = append(got[s.Name()], s)
		if s.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("%s in trace %s, want the queued job's", s.Name(), s.SpanContext().TraceID())
		}
	}
	wait := got[tracing.SpanQueueWait]
	if len(wait) != 1 || !wait[0].StartTime().Equal(accepted) || wait[0].Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("queue.wait spans %v, want one from the acceptance under the queueing span", wait)
	}
	att := got[tracing.SpanAttempt]
	if len(att) != 1 || att[0].Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("job.attempt spans %v, want one under the queueing span", att)
	}
	if n := len(got[tracing.SpanSandboxCreate]); n != 1 {
		t.Errorf("%d sandbox.create spans, want 1 (the restored sandbox was made before the job)", n)
	}
	if n := len(got[tracing.SpanRender]); n != 2 {
		t.Errorf("%d sandbox.render spans, want 2", n)
	}
	c, st := got[tracing.SpanSandboxCreate][0], got[tracing.SpanSandboxStart][0]
	if !c.StartTime().Equal(t0) || !st.StartTime().Equal(c.EndTime()) || st.EndTime().Sub(st.StartTime()) != 60*time.Millisecond {
		t.Errorf("create %v–%v, start %v–%v: want end to end from the exec's start", c.StartTime(), c.EndTime(), st.StartTime(), st.EndTime())
	}
	for _, s := range append(got[tracing.SpanSandboxCreate], got[tracing.SpanRender]...) {
		if s.Parent().SpanID() != att[0].SpanContext().SpanID() {
			t.Errorf("%s is not a child of the attempt", s.Name())
		}
	}
}
