package api_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/renderbox/renderbox"
	"github.com/renderbox/renderbox/internal/api"
	"github.com/renderbox/renderbox/internal/cidr"
)

// A traceparent header is followed only from a trusted proxy, as
// X-Request-Id is; from any other peer the request's trace starts at the
// API. Without a tracer the API makes no span at all.
func TestTraceparentOnlyFromTrustedProxies(t *testing.T) {
	const (
		sent    = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanID  = "00f067aa0ba902b7"
	)
	for _, c := range []struct {
		name    string
		proxies string // trusted; the test's client is 127.0.0.1
		sent    string
		joined  bool
	}{
		{name: "no proxy trusted", sent: sent},
		{name: "another proxy trusted", proxies: "10.0.0.0/8", sent: sent},
		{name: "from a trusted proxy", proxies: "127.0.0.1", sent: sent, joined: true},
		{name: "a trusted proxy's malformed traceparent", proxies: "127.0.0.1", sent: "00-zz-00f067aa0ba902b7-01"},
		{name: "none sent", proxies: "127.0.0.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			proxies, err := cidr.Parse(c.proxies)
			if err != nil {
				t.Fatal(err)
			}
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			defer tp.Shutdown(context.Background())
			s := &api.Server{OpenAPI: renderbox.OpenAPI, Logger: slog.New(slog.DiscardHandler), TrustedProxies: proxies, Traces: tp}
			getTraced(t, s, c.sent)
			spans := rec.Ended()
			if len(spans) != 1 {
				t.Fatalf("got %d spans, want the request's one", len(spans))
			}
			sp := spans[0]
			if sp.Name() != "GET /healthz" {
				t.Errorf("span name %q, want \"GET /healthz\"", sp.Name())
			}
			joined := sp.SpanContext().TraceID().String() == traceID && sp.Parent().SpanID().String() == spanID && sp.Parent().IsRemote()
			if joined != c.joined {
				t.Errorf("span of trace %s under %s: joined the sent trace %v, want %v", sp.SpanContext().TraceID(), sp.Parent().SpanID(), joined, c.joined)
			}
			if !c.joined && sp.Parent().IsValid() {
				t.Errorf("span has parent %s, want a root span", sp.Parent().SpanID())
			}
		})
	}
	t.Run("tracing off", func(t *testing.T) {
		s := &api.Server{OpenAPI: renderbox.OpenAPI, Logger: slog.New(slog.DiscardHandler)}
		if resp := getTraced(t, s, sent); resp.Header.Get("traceparent") != "" {
			t.Errorf("answer carries traceparent %q, want none", resp.Header.Get("traceparent"))
		}
	})
}

// getTraced sends GET /healthz to s from 127.0.0.1 with traceparent (if any).
func getTraced(t *testing.T, s *api.Server, traceparent string) *http.Response {
	t.Helper()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/healthz", nil)
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /healthz: %d", resp.StatusCode)
	}
	return resp
}
