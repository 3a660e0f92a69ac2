package api

import (
	"net/http"
	"slices"
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

// fonts answers the font families a document may name: those of the
// rootfs trees the live workers run (each tree lists its own at build;
// its workers publish it). Workers on different trees (an upgrade under
// way) show as several digests, and a family is listed once.
func (s *Server) fonts(w http.ResponseWriter, r *http.Request) {
	unavailable := func(detail string) {
		w.Header().Set("Retry-After", "5")
		problem(w, http.StatusServiceUnavailable, "unavailable", detail)
	}
	ws, err := s.Queue.Workers(r.Context())
	if err != nil {
		s.reqLog(r).Error("listing workers", "err", err)
		unavailable("the workers' heartbeats cannot be read (Redis does not answer); retry later")
		return
	}
	seen := map[string]bool{}
	digests, families := []string{}, []string{}
	for _, x := range ws {
		if x.Age > s.WorkerHeartbeatTimeout || seen[x.RootfsDigest] {
			continue
		}
		seen[x.RootfsDigest] = true
		fs, err := s.Queue.Fonts(r.Context(), x.RootfsDigest)
		if err != nil {
			s.reqLog(r).Error("reading a rootfs's fonts", "rootfs_digest", x.RootfsDigest, "err", err)
			unavailable("the fonts cannot be read (Redis does not answer); retry later")
			return
		}
		if fs != nil {
			digests = append(digests, x.RootfsDigest)
			families = append(families, fs...)
		}
	}
	if len(digests) == 0 {
		unavailable("no live worker has published its fonts yet (one does as it starts); retry later")
		return
	}
	slices.Sort(families)
	writeJSON(w, http.StatusOK, map[string]any{"families": slices.Compact(families), "rootfs_digests": digests})
}
