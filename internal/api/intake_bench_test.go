//go:build !unit

package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox"
	"github.com/renderbox/renderbox/internal/api"
	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/testenv"
)

// BenchmarkIntake submits small jobs from 8 clients at a time through the
// whole intake (authentication, limits, sniffing, the ledger, Redis) on a
// real SQLite ledger and Redis, with no worker: the API's part of `make
// bench`'s api_intake line.
//
//	go test ./internal/api -run '^$' -bench Intake -cpuprofile /tmp/intake.prof
func BenchmarkIntake(b *testing.B) {
	store, secret, _ := keyedLedger(b)
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(b, false), PoolSize: 64})
	b.Cleanup(func() { rdb.Close() })
	s := &api.Server{OpenAPI: renderbox.OpenAPI, Ledger: store, Queue: queue.New(rdb, 0),
		Limits: api.Limits{RatePerSecond: 1e9, Burst: 1e9, MaxQueueDepth: 1e9, MaxQueuedPerKey: 1e9}}
	srv := httptest.NewServer(s.Handler())
	b.Cleanup(srv.Close)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.SetParallelism(4) // GOMAXPROCS 2: 8 clients
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("POST", srv.URL+"/v1/jobs", strings.NewReader(svgJob))
			req.Header.Set("Authorization", "Bearer "+secret)
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 202 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "accepted/s")
}
