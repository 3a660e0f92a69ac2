package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/renderbox/renderbox/internal/ledger"
)

type keyCtx struct{}

// keyOf returns the authenticated key of a request.
func keyOf(r *http.Request) ledger.Key {
	k, _ := r.Context().Value(&keyCtx{}).(ledger.Key)
	return k
}

// authenticate requires "Authorization: Bearer <api key>".
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		secret, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || secret == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="renderbox"`)
			problem(w, http.StatusUnauthorized, "unauthorized", "send an API key as: Authorization: Bearer <key>")
			return
		}
		key, err := s.Ledger.Authenticate(r.Context(), secret)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="renderbox", error="invalid_token"`)
			problem(w, http.StatusUnauthorized, "unauthorized", "the API key is unknown or revoked")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), &keyCtx{}, key)))
	})
}

// limiters hold one token bucket per API key.
type limiters struct {
	mu    sync.Mutex
	per   rate.Limit
	burst int
	m     map[string]*rate.Limiter
}

func newLimiters(perSecond float64, burst int) *limiters {
	return &limiters{per: rate.Limit(perSecond), burst: burst, m: map[string]*rate.Limiter{}}
}

// allow reports whether key may submit now, and if not, when to retry.
func (l *limiters) allow(key string) (bool, time.Duration) {
	l.mu.Lock()
	lim, ok := l.m[key]
	if !ok {
		lim = rate.NewLimiter(l.per, l.burst)
		l.m[key] = lim
	}
	l.mu.Unlock()
	res := lim.Reserve()
	if d := res.Delay(); d > 0 {
		res.Cancel()
		return false, d
	}
	return true, 0
}

func retryAfter(d time.Duration) string {
	return strconv.Itoa(int(d.Seconds()) + 1)
}
