package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/renderbox/renderbox/internal/cidr"
)

// RequestIDHeader carries a request's id: returned on every answer,
// accepted on a request only from a trusted proxy.
const RequestIDHeader = "X-Request-Id"

// maxRequestID bounds an id a proxy sends; a longer one is replaced.
const maxRequestID = 128

type requestIDKey struct{}

// requestIDOf is the id requestID gave r, "" outside it.
func requestIDOf(r *http.Request) string {
	id, _ := r.Context().Value(&requestIDKey{}).(string)
	return id
}

// requestID gives every request an id, returns it in X-Request-Id and
// puts it in the request's context, whence the access log, the queued
// task and the worker's log lines for the job take it. An id a client
// sends is taken only from a TrustedProxies address — a proxy that sets
// it for every request it forwards; from anyone else it could be a lie
// planted in the operator's logs (another tenant's id, a forged line),
// so it is replaced.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if !s.fromTrustedProxy(r) || !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set(RequestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), &requestIDKey{}, id)))
	})
}

// reqLog is the logger for what a request's handler reports: its lines
// carry the request's id, as its access log line does.
func (s *Server) reqLog(r *http.Request) *slog.Logger {
	return s.Logger.With("request_id", requestIDOf(r))
}

func (s *Server) fromTrustedProxy(r *http.Request) bool {
	if len(s.TrustedProxies) == 0 {
		return false
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && cidr.Contains(s.TrustedProxies, ap.Addr())
}

// validRequestID keeps a proxy's id to characters that read plainly in a
// log and a header: letters, digits and - _ . : + / = @.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestID {
		return false
	}
	for _, c := range []byte(id) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '_', c == '.', c == ':', c == '+', c == '/', c == '=', c == '@':
		default:
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail (Go 1.24+)
	return "req_" + hex.EncodeToString(b[:])
}

// maxLoggedPath bounds the path an access log line quotes: a request line
// may be near a megabyte, and each one would be written to the log whole.
const maxLoggedPath = 512

// accessLog writes one JSON line per request when it ends, aborted ones
// included: method, path, status (0 for one cut off before its status),
// bytes, duration_seconds, request_id and remote (the peer: a proxy's
// address when there is one).
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		start := time.Now()
		defer func() {
			// A handler cut off with http.ErrAbortHandler (Recoverer
			// passes it on) is logged too, then passed on in turn.
			p := recover()
			status := ww.Status()
			if status == 0 && p == nil {
				status = http.StatusOK // nothing written: net/http sends 200
			}
			s.logRequest(r, status, ww.BytesWritten(), start)
			if p != nil {
				panic(p)
			}
		}()
		next.ServeHTTP(ww, r)
	})
}

func (s *Server) logRequest(r *http.Request, status, bytes int, start time.Time) {
	path := r.URL.Path
	if len(path) > maxLoggedPath {
		path = path[:maxLoggedPath] + "…"
	}
	s.Logger.Info("http request", "method", methodLabel(r.Method), "path", path, "status", status, "bytes", bytes,
		"duration_seconds", time.Since(start).Seconds(), "request_id", requestIDOf(r), "remote", r.RemoteAddr)
}
