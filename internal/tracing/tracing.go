// Package tracing sets up OpenTelemetry traces for the api and worker
// commands and names what they trace (docs/tracing.md). Tracing is off
// unless the standard OTEL_* variables turn it on: an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and
// not OTEL_SDK_DISABLED=true. Spans then go to that endpoint over
// OTLP/HTTP (protobuf), sampled as OTEL_TRACES_SAMPLER says (the SDK's
// default: parentbased_always_on).
//
// A job's trace crosses processes as a W3C traceparent string: in the
// queued task (queue.Payload.TraceParent) from the API to the worker, and
// in the job's record (ledger.Job.TraceParent) to whichever API replica
// delivers its webhook. Spans carry ids, names, sizes, modes and
// outcomes, never a document's bytes, an option's value, a secret or a
// URL's query.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Name is the instrumentation scope of renderbox's spans.
const Name = "github.com/renderbox/renderbox"

// Enabled says whether the environment (getenv, e.g. os.Getenv) turns
// tracing on: an OTLP endpoint is set and the SDK is not disabled.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// Provider is where a command's spans go: a no-op one when tracing is off.
type Provider struct {
	trace.TracerProvider
	sdk *sdktrace.TracerProvider
}

// On says whether spans are exported.
func (p Provider) On() bool { return p.sdk != nil }

// Shutdown exports the spans still buffered and stops the exporter; a
// command calls it once it has stopped serving, on a bounded context.
func (p Provider) Shutdown(ctx context.Context) error {
	if p.sdk == nil {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}

// Close exports the spans still buffered and stops the exporter, for at
// most a few seconds: a collector that is away does not hold up a
// command's stop. Commands defer it once tracing is set up.
func (p Provider) Close(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		log.Warn("flushing traces", "err", err)
	}
}

// Tracer is tp's tracer of renderbox's spans; the no-op one for a nil tp
// (a command, or a test, that does not trace).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return noop.NewTracerProvider().Tracer(Name)
	}
	return tp.Tracer(Name)
}

// Off is the provider of a command that does not trace.
func Off() Provider { return Provider{TracerProvider: noop.NewTracerProvider()} }

// Setup makes the command's provider from the environment (getenv): Off
// unless Enabled. service is the service.name unless OTEL_SERVICE_NAME
// (or service.name in OTEL_RESOURCE_ATTRIBUTES) names another; the
// exporter reads the other OTEL_EXPORTER_OTLP_* variables itself. The
// SDK's complaints (an endpoint that does not answer) go to log.
func Setup(ctx context.Context, getenv func(string) string, service, version string, log *slog.Logger) (Provider, error) {
	if !Enabled(getenv) {
		return Off(), nil
	}
	if p := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); p == "" {
		if p = getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); p != "" && p != "http/protobuf" {
			return Provider{}, fmt.Errorf("tracing: OTEL_EXPORTER_OTLP_PROTOCOL=%s: renderbox exports traces over http/protobuf only (unset it, or point a collector's OTLP/HTTP receiver at it)", p)
		}
	} else if p != "http/protobuf" {
		return Provider{}, fmt.Errorf("tracing: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=%s: renderbox exports traces over http/protobuf only", p)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return Provider{}, fmt.Errorf("tracing: the OTLP exporter: %w", err)
	}
	// Later options win: the command's name, then the environment's.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service), attribute.String("service.version", version)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return Provider{}, fmt.Errorf("tracing: the resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): %w", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return Provider{TracerProvider: sdk, sdk: sdk}, nil
}

// w3c reads and writes the traceparent header (and tracestate).
var w3c = propagation.TraceContext{}

// TraceParent is the W3C traceparent of ctx's span, "" when it has none
// (tracing off, or the span not sampled and not recording).
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	return c["traceparent"]
}

// WithParent returns ctx whose spans are children of the remote span
// traceparent names; ctx as it is when traceparent is "" or malformed.
func WithParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return w3c.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}
