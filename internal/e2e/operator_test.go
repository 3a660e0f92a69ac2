//go:build !unit

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/samples"
)

// The operator's dashboard (deploy/grafana) and alert rules
// (deploy/prometheus) are built on metrics the API and the worker serve:
// every renderbox_ series they name is in a live /metrics once a job with
// a webhook has run through a worker with a pool, and a job's input was
// fetched (download_from) and another's refused. The rules pass
// `promtool check rules` and their unit tests (`promtool test rules`).
func TestOperatorDashboards(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is missing; scripts/setup.sh (make setup) installs it from Debian's prometheus package")
	}
	rules := filepath.Join("..", "..", "deploy", "prometheus")
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = rules
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	used := map[string][]string{} // metric → where
	metricName := regexp.MustCompile(`\brenderbox_[a-z_]+\b`)
	note := func(where, expr string) {
		for _, m := range metricName.FindAllString(expr, -1) {
			used[m] = append(used[m], where)
		}
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "renderbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("deploy/grafana/renderbox.json: %v", err)
	}
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			note("panel "+p.Title, q.Expr)
		}
	}
	alerts, err := os.ReadFile(filepath.Join(rules, "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(alerts), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			note("alerts.yml", line)
		}
	}
	if len(used) < 15 {
		t.Fatalf("the dashboard and rules name %d metrics; the parsing above is broken", len(used))
	}

	rcv := newHookReceiver(t)
	files, _ := fileServer(t, "127.0.0.3", map[string][]byte{"/shape.svg": samples.SVG(40, 20, 0, 0, 5)}, nil)
	s := newStack(t, stackOpts{apiArgs: []string{"-webhook-allow", "127.0.0.2/32", "-remote-content", "-remote-allow", "127.0.0.3/32"},
		workerArgs: []string{"-pool-size", "light=1", "-metrics-addr", "127.0.0.1:0"}})
	var wm struct {
		Addr string `json:"addr"`
	}
	s.worker.waitLog(t, "metrics listening", &wm)
	key := s.key("operator")
	_, j := submitWithCallback(t, s.client, key, "svg-png", samples.SVG(40, 20, 0, 0, 5), rcv.answer("/ops"))
	if w := webhookOf(t, s.client, key, j.ID); w.State != "delivered" {
		t.Fatalf("the job's webhook: %+v", w)
	}
	// svg-pdf, not to count in svg-png's phases below.
	if r, _ := downloadSubmit(t, s.client, key, "svg-pdf", "", map[string]any{"url": files + "/shape.svg"}); r.Status != 202 {
		t.Errorf("a download_from job: %d %s", r.Status, r.Body)
	}
	if r, _ := downloadSubmit(t, s.client, key, "svg-pdf", "", map[string]any{"url": "http://169.254.169.254/latest/"}); r.Status != 400 {
		t.Errorf("a download_from of the metadata address: %d %s, want refused", r.Status, r.Body)
	}
	// The job's wait for the light family's pool sandbox is a phase of
	// its own, beside the render.
	for _, phase := range []string{"take", "render"} {
		want := `renderbox_sandbox_phase_seconds_count{phase="` + phase + `",renderer="svg-png"} 1`
		if m := scrape(t, "http://"+wm.Addr+"/metrics"); !strings.Contains(m, want) {
			t.Errorf("the worker's /metrics lack %s", want)
		}
	}
	served := map[string]bool{}
	for _, url := range []string{s.metrics, "http://" + wm.Addr + "/metrics"} {
		for _, line := range strings.Split(scrape(t, url), "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			served[strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
		}
	}
	var missing []string
	for m, where := range used {
		if !served[m] {
			missing = append(missing, m+" (in "+strings.Join(where, ", ")+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("named by deploy/ but served by neither the API nor the worker:\n%s", strings.Join(missing, "\n"))
	}
	t.Logf("%d metrics used by the dashboard and the alert rules, all served", len(used))
}
