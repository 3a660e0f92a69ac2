package tracing

import (
	"context"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// The spans of a job's trace, in the order they begin (docs/tracing.md).
// The API's HTTP server span is named by its method and route ("POST
// /v1/jobs").
const (
	// The API.
	SpanIntake = "job.intake"   // the submission checked, recorded and queued
	SpanSubmit = "queue.submit" // the task and input written to Redis; the worker's parent
	// The worker.
	SpanQueueWait     = "queue.wait"       // from acceptance to the worker's take
	SpanAttempt       = "job.attempt"      // one delivery of the job's task
	SpanTake          = "job.take"         // markers checked, running reported, input read
	SpanSandboxTake   = "sandbox.take"     // asking the pool (one that serves the family); mode none: it had none
	SpanSandboxCreate = "sandbox.create"   // bundle + runsc create (a cold sandbox)
	SpanSandboxStart  = "sandbox.start"    // runsc start (a pre-booted sandbox was started before)
	SpanRender        = "sandbox.render"   // request sent to the agent → response read
	SpanCheck         = "outputs.check"    // the files checked as the renderer's outputs
	SpanStore         = "storage.write"    // the outputs written to storage
	SpanReport        = "job.report"       // the end published to the API
	SpanTeardown      = "sandbox.teardown" // kill + delete, after the report
	// The API again, on whichever replica claims the delivery.
	SpanWebhook = "webhook.deliver" // one attempt
)

// Attribute keys. Values are ids, names, counts, sizes, modes and
// outcomes: never a document's bytes, an option's value, a secret, a
// key's secret or a URL's path or query.
const (
	JobID       = attribute.Key("renderbox.job_id")
	Renderer    = attribute.Key("renderbox.renderer")
	KeyID       = attribute.Key("renderbox.key_id") // the owner key's id, never its secret
	RequestID   = attribute.Key("renderbox.request_id")
	InputBytes  = attribute.Key("renderbox.input_bytes")
	InputType   = attribute.Key("renderbox.input_type")
	Callback    = attribute.Key("renderbox.callback") // whether the job has a webhook
	Worker      = attribute.Key("renderbox.worker")
	Attempt     = attribute.Key("renderbox.attempt")
	Stage       = attribute.Key("renderbox.stage")
	SandboxMode = attribute.Key("renderbox.sandbox_mode")
	SandboxID   = attribute.Key("renderbox.sandbox_id")
	Outcome     = attribute.Key("renderbox.outcome")
	ErrorCode   = attribute.Key("renderbox.error_code")
	State       = attribute.Key("renderbox.state")
	Outputs     = attribute.Key("renderbox.outputs")
	OutputBytes = attribute.Key("renderbox.output_bytes")
	// OpenTelemetry's semantic conventions.
	HTTPMethod = attribute.Key("http.request.method")
	HTTPRoute  = attribute.Key("http.route")
	HTTPStatus = attribute.Key("http.response.status_code")
	ServerAddr = attribute.Key("server.address")
)

// Record adds a span that already ended, from start to end, as a child
// of ctx's span: the stages the worker timed (sandbox.Timings) become
// spans without threading a context through the sandbox manager.
func Record(ctx context.Context, t trace.Tracer, name string, start, end time.Time, attrs ...attribute.KeyValue) {
	_, span := t.Start(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	span.End(trace.WithTimestamp(end))
}

// Host is the host of rawURL, for a span that names where it sent
// something without its path or query (which may carry a token); "" when
// rawURL does not parse.
func Host(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
