package tracing_test

import (
	"context"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/renderbox/renderbox/internal/tracing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// Tracing is off unless an OTLP endpoint is set, and OTEL_SDK_DISABLED
// turns it off again.
func TestEnabled(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_SERVICE_NAME": "api", "OTEL_TRACES_SAMPLER": "always_on"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "TRUE"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "false"}, true},
	} {
		if got := tracing.Enabled(env(c.env)); got != c.want {
			t.Errorf("Enabled(%v) = %v, want %v", c.env, got, c.want)
		}
	}
}

// Off by default: Setup without an endpoint exports nothing and its spans
// carry no context, so no traceparent reaches a task or the ledger.
func TestSetupOffByDefault(t *testing.T) {
	p, err := tracing.Setup(context.Background(), env(nil), "renderbox-api", "test", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if p.On() {
		t.Error("On() with no OTEL_* variable set, want off")
	}
	ctx, span := p.Tracer(tracing.Name).Start(context.Background(), tracing.SpanIntake)
	defer span.End()
	if span.IsRecording() || tracing.TraceParent(ctx) != "" {
		t.Errorf("tracing off: span recording %v, traceparent %q; want neither", span.IsRecording(), tracing.TraceParent(ctx))
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown of the off provider: %v", err)
	}
}

// Only OTLP/HTTP is built in: a gRPC protocol is refused, naming the fix.
func TestSetupRefusesGRPC(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		_, err := tracing.Setup(context.Background(), env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", k: "grpc"}), "x", "", slog.New(slog.DiscardHandler))
		if err == nil {
			t.Errorf("%s=grpc: no error, want a refusal", k)
		}
	}
}

// A traceparent written by TraceParent is read back by WithParent; a
// malformed one leaves the context without a parent.
func TestTraceParentRoundTrip(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := tracing.WithParent(context.Background(), tp)
	if got := tracing.TraceParent(ctx); got != tp {
		t.Errorf("TraceParent(WithParent(%s)) = %q", tp, got)
	}
	for _, bad := range []string{"", "00-xyz-00f067aa0ba902b7-01", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		if sc := trace.SpanContextFromContext(tracing.WithParent(context.Background(), bad)); sc.IsValid() {
			t.Errorf("WithParent(%q) gave a parent %s", bad, sc.TraceID())
		}
	}
	if got := tracing.Host("https://hooks.example.com:8443/p/secret?token=abc"); got != "hooks.example.com" {
		t.Errorf("Host = %q, want hooks.example.com", got)
	}
}
