//go:build !unit

package e2e

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/rootfs"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// writeSecret writes a password file as an operator would (echo pw > f:
// with its newline).
func writeSecret(t *testing.T, dir, pw string) string {
	t.Helper()
	f := filepath.Join(dir, "redis.password")
	if err := os.WriteFile(f, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// renderThrough checks that a job goes through the stack's API, Redis and
// worker and that its output downloads.
func renderThrough(t *testing.T, s *stack) {
	t.Helper()
	key := s.key("tenant")
	r, j := submitJSON(t, s.client, key, "svg-png", samples.SVG(40, 40, 5, 5, 10), nil, "?wait=30", nil)
	if r.Status != 200 || j.State != "succeeded" || len(j.Outputs) != 1 {
		t.Fatalf("a job: %d %s %+v, want 200 succeeded with one output", r.Status, j.State, j.Error)
	}
	if out := s.client.do("GET", j.Outputs[0].URL, key, "", nil, nil); out.Status != 200 || len(out.Body) == 0 {
		t.Errorf("its output: %d, %d bytes, want 200 with the PNG", out.Status, len(out.Body))
	}
}

// noSecretInArgs fails when a process's command line (what ps shows
// every user) holds the password.
func noSecretInArgs(t *testing.T, p *proc, name, pw string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.cmd.Process.Pid), "cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), pw) {
		t.Errorf("the %s's command line shows the Redis password: %q", name, b)
	}
}

// The API and the worker reach a Redis with a password, given by file and
// by environment, and one over TLS with a private CA, and never show the
// password in ps.
func TestRedisWithCredentials(t *testing.T) {
	const pw = "fleet s3cret #1"
	t.Run("password by file and by environment", func(t *testing.T) {
		s := newStack(t, stackOpts{redis: testenv.RedisConfig{Password: pw},
			access: func(rs *testenv.RedisServer, dir string) map[string]redisAccess {
				return map[string]redisAccess{
					"api":    {args: []string{"-redis", rs.Addr}, env: []string{"RENDERBOX_REDIS_PASSWORD=" + pw}},
					"worker": {args: []string{"-redis", "redis://" + rs.Addr + "/0", "-redis-password-file", writeSecret(t, dir, pw)}},
				}
			}})
		renderThrough(t, s)
		noSecretInArgs(t, s.api, "api", pw)
		noSecretInArgs(t, s.worker, "worker", pw)
	})
	t.Run("rediss with a private CA", func(t *testing.T) {
		s := newStack(t, stackOpts{redis: testenv.RedisConfig{Password: pw, TLS: true},
			access: func(rs *testenv.RedisServer, dir string) map[string]redisAccess {
				return map[string]redisAccess{
					// The whole URL, password included, in the environment;
					// database 3 for both.
					"api": {args: []string{"-redis-ca-file", rs.CAFile},
						env: []string{"RENDERBOX_REDIS_URL=" + (&url.URL{Scheme: "rediss", User: url.UserPassword("", pw), Host: rs.Addr, Path: "/3"}).String()}},
					"worker": {args: []string{"-redis", "rediss://" + rs.Addr + "/3", "-redis-ca-file", rs.CAFile,
						"-redis-password-file", writeSecret(t, dir, pw)}},
				}
			}})
		renderThrough(t, s)
		noSecretInArgs(t, s.worker, "worker", pw)
	})
}

// A wrong or missing password, a CA that does not verify and a password in
// the -redis flag stop the binaries at start, each with what to fix. The
// worker dials Redis after its sandbox checks (a second worker on a state
// dir refuses before it touches the queue), so it runs them here in a
// private state dir and cgroup parent, for two of the cases; the queue
// package's tests cover every message.
func TestRedisRefusedAtStart(t *testing.T) {
	rs := testenv.StartRedis(t, testenv.RedisConfig{Password: "right", TLS: true})
	dir := t.TempDir()
	other, _, _ := testenv.TLSFiles(t, dir, "127.0.0.1")
	addr := "rediss://" + rs.Addr
	sb := testenv.Manager(t, sandbox.Config{}).Config()
	for _, tc := range []struct {
		name string
		bins []string
		args []string
		env  []string
		want string
	}{
		{"wrong password", []string{"api", "worker"}, []string{"-redis", addr, "-redis-ca-file", rs.CAFile}, []string{"RENDERBOX_REDIS_PASSWORD=wrong"},
			"refused the user and password"},
		{"no password", []string{"api"}, []string{"-redis", addr, "-redis-ca-file", rs.CAFile}, nil, "wants a password"},
		{"another CA", []string{"api"}, []string{"-redis", addr, "-redis-ca-file", other}, []string{"RENDERBOX_REDIS_PASSWORD=right"},
			"its certificate does not verify"},
		{"password in the flag", []string{"api", "worker"}, []string{"-redis", "rediss://:right@" + rs.Addr, "-redis-ca-file", rs.CAFile}, nil,
			"-redis holds a password, which every user on the host sees in ps; pass it in RENDERBOX_REDIS_PASSWORD"},
	} {
		for _, bin := range tc.bins {
			t.Run(tc.name+"/"+bin, func(t *testing.T) {
				args := []string{"serve", "-db", filepath.Join(t.TempDir(), "ledger.db"), "-addr", freeAddr(t), "-metrics-addr", ""}
				if bin == "worker" {
					args = []string{"serve", "-rootfs", testenv.RootfsTree(t), "-state-dir", sb.StateDir, "-cgroup-parent", sb.CgroupParent,
						"-runsc", sb.Runsc, "-metrics-addr", "", "-pool-size", "none"}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, filepath.Join(bins, bin), append(args, tc.args...)...)
				cmd.Env = append(os.Environ(), tc.env...)
				out, err := cmd.CombinedOutput()
				if err == nil || ctx.Err() != nil {
					t.Fatalf("%s started (err %v), want it refused:\n%s", bin, err, tailStr(string(out), 2000))
				}
				if !strings.Contains(string(out), tc.want) {
					t.Errorf("%s says:\n%s\nwant it to say %q", bin, tailStr(string(out), 2000), tc.want)
				}
				if strings.Contains(string(out), "right@") {
					t.Errorf("%s shows the password: %s", bin, out)
				}
			})
		}
	}
}

type workersJSON struct {
	Workers []struct {
		queue.WorkerInfo
		AgeSeconds float64 `json:"age_seconds"`
		Alive      bool    `json:"alive"`
	} `json:"workers"`
}

// /readyz is 503 with a reason until a worker sends a heartbeat, 200 while
// one does, and 503 again once a worker killed with kill -9 goes silent
// past -worker-heartbeat-timeout; a drained worker's heartbeat goes at
// once. GET /v1/workers shows them to admin keys only.
func TestWorkerLiveness(t *testing.T) {
	const bound = 3 * time.Second
	s := newStack(t, stackOpts{noWorker: true, apiArgs: []string{"-worker-heartbeat-timeout", bound.String()}})
	c := s.client
	admin, tenant := s.adminKey("ops"), s.key("tenant")
	workers := func() workersJSON {
		t.Helper()
		var w workersJSON
		r := c.do("GET", "/v1/workers", admin, "", nil, nil)
		if r.Status != 200 {
			t.Fatalf("GET /v1/workers as admin: %d %s", r.Status, tail(r.Body))
		}
		r.json(t, &w)
		return w
	}
	readyStatus := func() int { return c.do("GET", "/readyz", "", "", nil, nil).Status }

	r := c.do("GET", "/readyz", "", "", nil, nil)
	var rd ready
	r.json(t, &rd)
	if r.Status != 503 || rd.Checks["workers"] != "none" || !strings.Contains(rd.Reason, "no worker has sent a heartbeat in the last 3s") {
		t.Errorf("/readyz before any worker: %d %s, want 503 with workers none and the reason", r.Status, r.Body)
	}
	if w := workers(); len(w.Workers) != 0 {
		t.Errorf("workers before any: %+v, want none", w)
	}
	if r := c.do("GET", "/v1/workers", tenant, "", nil, nil); r.Status != 403 || r.problemCode(t) != "forbidden" {
		t.Errorf("GET /v1/workers as a tenant: %d %s, want 403 forbidden", r.Status, tail(r.Body))
	}
	if r := c.do("GET", "/v1/workers", "", "", nil, nil); r.Status != 401 {
		t.Errorf("GET /v1/workers without a key: %d, want 401", r.Status)
	}

	wp := s.startWorker("-heartbeat-interval", "500ms", "-name", "fleet-a", "-metrics-addr", "127.0.0.1:0")
	var metrics struct {
		Addr string `json:"addr"`
	}
	wp.waitLog(t, "metrics listening", &metrics)
	waddr := metrics.Addr
	waitFor(t, "/readyz 200 once the worker sends heartbeats", 5*time.Second, func() bool { return readyStatus() == 200 })
	tree, err := filepath.EvalSymlinks(testenv.RootfsTree(t))
	if err != nil {
		t.Fatal(err)
	}
	man, err := rootfs.ReadManifest(tree)
	if err != nil {
		t.Fatal(err)
	}
	v, err := sandbox.CheckVersion(context.Background(), s.workerSB.Runsc)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	w := workers()
	if len(w.Workers) != 1 {
		t.Fatalf("workers: %+v, want one", w)
	}
	first := w.Workers[0]
	if first.Name != "fleet-a" || first.Host != host || first.RootfsDigest != man.TreeSHA256 || first.RunscVersion != v.Raw ||
		first.Concurrency != 2 || !first.Alive || first.AgeSeconds > bound.Seconds() || len(first.PoolFamilies) != 0 {
		t.Errorf("the worker: %+v, want fleet-a on %s, rootfs %s, runsc %s, concurrency 2, alive, no pool", first, host, man.TreeSHA256, v.Raw)
	}
	if m := s.scrape(); !strings.Contains(m, "renderbox_workers_alive 1") {
		t.Errorf("/metrics lacks renderbox_workers_alive 1")
	}
	// The rootfs it runs, in its log, its /metrics and each job's record.
	if !strings.Contains(s.worker.output(), `"rootfs_digest":"`+man.TreeSHA256+`"`) {
		t.Errorf("the worker's start log lacks rootfs_digest %s:\n%s", man.TreeSHA256, tailStr(s.worker.output(), 2000))
	}
	if m := scrape(t, "http://"+waddr+"/metrics"); !strings.Contains(m, `renderbox_worker_rootfs_info{digest="`+man.TreeSHA256+`"} 1`) {
		t.Errorf("the worker's /metrics lacks renderbox_worker_rootfs_info for %s", man.TreeSHA256)
	}
	// The build, on both binaries' metrics and at GET /version, is the one
	// their -version prints.
	var build struct {
		Version   string `json:"version"`
		GoVersion string `json:"go_version"`
	}
	c.do("GET", "/version", "", "", nil, nil).json(t, &build)
	out, err := exec.Command(filepath.Join(bins, "api"), "-version").Output()
	if err != nil || !strings.HasPrefix(string(out), "api "+build.Version+" ") || !strings.HasSuffix(string(out), " "+build.GoVersion+"\n") {
		t.Errorf("api -version: %q (%v); GET /version: %+v; want the same build", out, err, build)
	}
	want := `version="` + build.Version + `"} 1`
	for name, m := range map[string]string{"api": s.scrape(), "worker": scrape(t, "http://"+waddr+"/metrics")} {
		if !strings.Contains(m, `renderbox_build_info{goversion="`+build.GoVersion+`"`) || !strings.Contains(m, want) {
			t.Errorf("the %s's /metrics lacks renderbox_build_info for %+v", name, build)
		}
	}
	r, j := submitJSON(t, c, tenant, "svg-png", samples.SVG(40, 40, 5, 5, 10), nil, "?wait=30", nil)
	if r.Status != 200 || j.State != "succeeded" || j.Worker == nil || j.Worker.Name != "fleet-a" || j.Worker.RootfsDigest != man.TreeSHA256 {
		t.Errorf("a job: %d %s, worker %+v; want succeeded by fleet-a on rootfs %s", r.Status, j.State, j.Worker, man.TreeSHA256)
	}
	if got := getJob(t, c, tenant, j.ID, ""); got.Worker == nil || got.Worker.RootfsDigest != man.TreeSHA256 {
		t.Errorf("GET the job: worker %+v, want rootfs %s", got.Worker, man.TreeSHA256)
	}

	if err := s.worker.cmd.Process.Kill(); err != nil { // kill -9: no drain, the heartbeat stays
		t.Fatal(err)
	}
	_ = s.worker.cmd.Wait()
	killed := time.Now()
	waitFor(t, "/readyz 503 once the killed worker's heartbeat is past the bound", bound+3*time.Second, func() bool { return readyStatus() == 503 })
	if d := time.Since(killed); d < bound-time.Second {
		t.Errorf("/readyz turned 503 %v after the kill, before the %v bound", d, bound)
	}
	t.Logf("/readyz was 503 %v after kill -9 (bound %v)", time.Since(killed).Round(time.Millisecond), bound)
	if w := workers(); len(w.Workers) != 1 || w.Workers[0].ID != first.ID || w.Workers[0].Alive {
		t.Errorf("workers after kill -9: %+v, want the killed one listed, not alive", w)
	}

	// A drained worker removes its heartbeat on SIGTERM: gone at once.
	second := s.startWorker("-heartbeat-interval", "500ms", "-name", "fleet-b")
	waitFor(t, "/readyz 200 with the second worker", 5*time.Second, func() bool { return readyStatus() == 200 })
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := second.cmd.Wait(); err != nil {
		t.Fatalf("the drained worker: %v", err)
	}
	if st := readyStatus(); st != 503 {
		t.Errorf("/readyz right after the only live worker drained: %d, want 503", st)
	}
	for _, x := range workers().Workers {
		if x.Name == "fleet-b" {
			t.Errorf("the drained worker is still listed: %+v", x)
		}
	}
	if m := s.scrape(); !strings.Contains(m, "renderbox_workers_alive 0") {
		t.Errorf("/metrics lacks renderbox_workers_alive 0")
	}
}
