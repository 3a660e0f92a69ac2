package api

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/renderbox/renderbox/internal/tracing"
)

// tracer is the API's tracer: the no-op one unless Server.Traces is set.
func (s *Server) tracer() trace.Tracer { return tracing.Tracer(s.Traces) }

// traceRequest gives each request a server span named by its method and
// route (never the raw path, nor the query: they are the client's). The
// span continues the trace a W3C traceparent header names only when the
// request comes from a TrustedProxies address, as X-Request-Id does;
// from anyone else the header is ignored and the trace starts here — a
// client must not graft its requests onto another tenant's trace, nor
// choose the ids the operator's sampler decides by.
func (s *Server) traceRequest(next http.Handler) http.Handler {
	if s.Traces == nil {
		return next
	}
	t := s.tracer()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if s.fromTrustedProxy(r) {
			ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(r.Header))
		}
		method := methodLabel(r.Method)
		ctx, span := t.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(tracing.HTTPMethod.String(method), tracing.RequestID.String(requestIDOf(r))))
		defer span.End()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r.WithContext(ctx))
		route := chi.RouteContext(ctx).RoutePattern()
		if route == "" {
			route = "unmatched"
		}
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		span.SetName(method + " " + route)
		span.SetAttributes(tracing.HTTPRoute.String(route), tracing.HTTPStatus.Int(status))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	})
}

// startSpan starts a span of the API's under ctx's.
func (s *Server) startSpan(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return s.tracer().Start(ctx, name, opts...)
}
