// Package api is renderbox's HTTP layer (chi). It never renders and never
// runs runsc: it validates, enqueues and answers.
package api

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/renderbox/renderbox/internal/render"
)

// Server is the HTTP API.
type Server struct {
	OpenAPI []byte
	Logger  *slog.Logger
}

// Handler returns the routes.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Recoverer)
	r.Get("/healthz", s.healthz)
	r.Get("/openapi.yaml", s.openapi)
	r.Get("/v1/renderers", s.renderers)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		problem(w, http.StatusNotFound, "not_found", "no such route: "+r.Method+" "+r.URL.Path)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		problem(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed on "+r.URL.Path)
	})
	return r
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(s.OpenAPI)
}

type rendererLimits struct {
	TimeoutSeconds float64 `json:"timeout_seconds"`
	MemoryBytes    int64   `json:"memory_bytes"`
	CPUs           float64 `json:"cpus"`
	MaxOutputBytes int64   `json:"max_output_bytes"`
	MaxOutputFiles int     `json:"max_output_files"`
}

type rendererJSON struct {
	*render.Renderer
	Options []render.Option `json:"options"` // [] rather than null
	Limits  rendererLimits  `json:"limits"`
}

func (s *Server) renderers(w http.ResponseWriter, _ *http.Request) {
	var list []rendererJSON
	for _, r := range render.All() {
		l := r.Limits.WithDefaults()
		list = append(list, rendererJSON{Renderer: r, Options: append([]render.Option{}, r.Options...), Limits: rendererLimits{
			TimeoutSeconds: l.Timeout.Seconds(), MemoryBytes: l.MemoryBytes, CPUs: l.CPUs,
			MaxOutputBytes: l.MaxOutputBytes, MaxOutputFiles: l.MaxOutputFiles,
		}})
	}
	writeJSON(w, http.StatusOK, map[string]any{"renderers": list})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// problem writes an RFC 9457 problem+json response with a stable code.
func problem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type": "https://renderbox.dev/problems/" + code, "title": http.StatusText(status),
		"status": status, "detail": detail, "code": code,
	})
}
