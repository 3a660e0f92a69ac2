package api

import (
	"net/http"
	"time"

	"github.com/renderbox/renderbox/internal/queue"
)

// requireAdmin lets only admin keys through (after authenticate). A
// tenant's key hears 403: the route is public in openapi.yaml, so its
// existence is no secret, and 403 tells the caller what is missing where
// 404 would send them looking for a typo.
func requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !keyOf(r).Admin {
			problem(w, http.StatusForbidden, "forbidden", "only an admin key may call this (the operator makes one with: api keys create -admin NAME)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// workerJSON is a worker in GET /v1/workers: what it said of itself, and
// when it was last heard.
type workerJSON struct {
	queue.WorkerInfo
	LastHeartbeat time.Time `json:"last_heartbeat"`
	AgeSeconds    float64   `json:"age_seconds"`
	Alive         bool      `json:"alive"`
}

// listWorkers lists the workers whose heartbeat record has not expired,
// the most recently heard first; alive says whether the last heartbeat is
// within WorkerHeartbeatTimeout (what /readyz counts).
func (s *Server) listWorkers(w http.ResponseWriter, r *http.Request) {
	ws, err := s.Queue.Workers(r.Context())
	if err != nil {
		s.reqLog(r).Error("listing workers", "err", err)
		w.Header().Set("Retry-After", "5")
		problem(w, http.StatusServiceUnavailable, "unavailable", "the workers' heartbeats cannot be read (Redis does not answer); retry later")
		return
	}
	list := []workerJSON{}
	for _, x := range ws {
		if x.PoolFamilies == nil {
			x.PoolFamilies = []string{} // [] rather than null
		}
		list = append(list, workerJSON{WorkerInfo: x.WorkerInfo, LastHeartbeat: x.LastHeartbeat,
			AgeSeconds: x.Age.Seconds(), Alive: x.Age <= s.WorkerHeartbeatTimeout})
	}
	writeJSON(w, http.StatusOK, map[string]any{"workers": list, "heartbeat_timeout_seconds": s.WorkerHeartbeatTimeout.Seconds()})
}
