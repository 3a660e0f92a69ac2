//go:build !unit

package e2e

import (
	"encoding/json"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/samples"
)

// durationKey is a log key that names a duration; every such key must end
// in _seconds (docs/operations.md, "Logs"), never carry a time.Duration, which slog's
// JSON writes as nanoseconds.
var durationKey = regexp.MustCompile(`(?i)(duration|timeout|interval|elapsed|latency|took|wait|waited|delay|age|seconds)$`)

// goDuration is a value written as a Go duration ("30s", "1m0s").
var goDuration = regexp.MustCompile(`^-?[0-9.]+(ns|µs|us|ms|s|m|h)([0-9.]+(ms|s|m))*$`)

// The API's and the worker's serve log JSON from their first line to
// their last — the worker's start-up checks and self-test, a job, a
// webhook, Redis going away and coming back (go-redis's and asynq's own
// messages), the pool, a drain on SIGTERM — and every duration in them is
// a number of seconds under a key ending in _seconds.
func TestServeLogsAreJSON(t *testing.T) {
	rcv := newHookReceiver(t)
	s := newStack(t, stackOpts{
		apiArgs:    []string{"-webhook-allow", "127.0.0.2/32"},
		workerArgs: []string{"-pool-size", "light=1,chromium=0,office=0", "-pool-restore", "", "-heartbeat-interval", "500ms"},
	})
	key := s.key("logs")
	r, j := submitWithCallback(t, s.client, key, "svg-png", samples.SVG(40, 20, 0, 0, 5), rcv.answer("/logs"))
	if r.Status >= 300 {
		t.Fatalf("submit: %d %s", r.Status, r.Body)
	}
	if w := webhookOf(t, s.client, key, j.ID); w.State != "delivered" {
		t.Fatalf("webhook: %+v", w)
	}
	// Redis away for a while: the clients' own complaints go to the logs.
	s.redisSrv.Stop()
	for range 6 {
		if resp, err := http.Get(s.base + "/readyz"); err == nil {
			resp.Body.Close()
		}
		time.Sleep(500 * time.Millisecond)
	}
	s.redisSrv.Start()
	s.waitReadyBut("the api to be ready once Redis is back", "")
	for _, p := range []*proc{s.api, s.worker} {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.cmd.Wait()
	}

	for name, out := range map[string]string{"api": s.api.output(), "worker": s.worker.output()} {
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		msgs := map[string]bool{}
		for i, line := range lines {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Errorf("%s serve, line %d is not JSON: %q", name, i+1, line)
				continue
			}
			if _, ok := rec["time"]; !ok || rec["level"] == nil || rec["msg"] == nil {
				t.Errorf("%s serve, line %d has no time, level or msg: %s", name, i+1, line)
			}
			msgs[rec["msg"].(string)] = true
			for k, v := range rec {
				switch v := v.(type) {
				case float64:
					if durationKey.MatchString(k) && !strings.HasSuffix(k, "_seconds") {
						t.Errorf("%s serve, line %d: %q=%v is a duration not named _seconds: %s", name, i+1, k, v, line)
					}
					if strings.HasSuffix(k, "_seconds") && (v < 0 || v > 7*24*3600) {
						t.Errorf("%s serve, line %d: %q=%v is not a number of seconds: %s", name, i+1, k, v, line)
					}
				case string:
					if k != "msg" && goDuration.MatchString(v) {
						t.Errorf("%s serve, line %d: %q=%q is a Go duration, want a number of seconds under a _seconds key: %s", name, i+1, k, v, line)
					}
					if strings.HasSuffix(k, "_seconds") {
						t.Errorf("%s serve, line %d: %q=%q is a string, want a number: %s", name, i+1, k, v, line)
					}
				}
			}
		}
		want := map[string][]string{
			"api":    {"api listening", "http request", "webhook attempt"},
			"worker": {"start-up check", "worker ready", "job finished", "draining: no new jobs; waiting for running ones", "worker stopped"},
		}[name]
		for _, m := range want {
			if !msgs[m] {
				t.Errorf("%s serve logged no %q (the test did not exercise what it checks)", name, m)
			}
		}
		t.Logf("%s serve: %d lines; messages: %q", name, len(lines), slices.Sorted(maps.Keys(msgs)))
		if t.Failed() {
			t.Logf("%s output:\n%s", name, tailStr(out, 6000))
		}
	}
}
