package worker

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/renderbox/renderbox/internal/sandbox"
)

// TestPoolEventMetrics: each kind of pool event lands on its counter with
// its label values, and a failed fill's error text is no label.
func TestPoolEventMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	for _, e := range []sandbox.PoolEvent{
		{Family: "light", Kind: sandbox.PoolHit, Mode: sandbox.ModePrebooted},
		{Family: "light", Kind: sandbox.PoolMiss, Reason: sandbox.MissEmpty},
		{Family: "light", Kind: sandbox.PoolFill, Mode: sandbox.ModePrebooted, Duration: time.Second},
		{Family: "chromium", Kind: sandbox.PoolImage, Duration: time.Second},
		{Family: "light", Kind: sandbox.PoolFillFailed, Reason: "booting light: no ready frame"},
		{Family: "light", Kind: sandbox.PoolEvict, Reason: sandbox.GoneMaxIdle},
		{Family: "light", Kind: sandbox.PoolDied, Reason: sandbox.GoneDied},
	} {
		m.PoolEvent(e)
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var series []string
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, "renderbox_pool_jobs_total{") || strings.HasPrefix(line, "renderbox_pool_events_total{") {
			series = append(series, line)
		}
	}
	want := []string{
		`renderbox_pool_events_total{event="died",family="light",reason="died"} 1`,
		`renderbox_pool_events_total{event="evict",family="light",reason="max_idle"} 1`,
		`renderbox_pool_events_total{event="fill",family="light",reason=""} 1`,
		`renderbox_pool_events_total{event="fill_failed",family="light",reason=""} 1`,
		`renderbox_pool_events_total{event="image",family="chromium",reason=""} 1`,
		`renderbox_pool_jobs_total{family="light",mode="",reason="empty",result="miss"} 1`,
		`renderbox_pool_jobs_total{family="light",mode="prebooted",reason="",result="hit"} 1`,
	}
	if strings.Join(series, "\n") != strings.Join(want, "\n") {
		t.Errorf("series:\n%s\nwant:\n%s", strings.Join(series, "\n"), strings.Join(want, "\n"))
	}
}
