//go:build !unit

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/renderbox/renderbox"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

var bins string // directory with the api and worker binaries

func TestMain(m *testing.M) {
	// Run as the helper of TestWorkerRunsAsItsUnitRunsIt.
	if families := os.Getenv(familiesEnv); families != "" {
		restrictFamilies(families, os.Args[1:])
	}
	dir, err := os.MkdirTemp("", "renderbox-e2e-")
	if err != nil {
		panic(err)
	}
	for _, name := range []string{"api", "worker", "renderbox"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), "github.com/renderbox/renderbox/cmd/"+name).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", name, err, out)
			os.Exit(1)
		}
	}
	bins = dir
	code := testenv.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running binary whose output is kept for the test log.
type proc struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	out bytes.Buffer
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitLog waits for the process to log a JSON line whose msg is msg and
// decodes that line into v; the process exiting first fails the test.
func (p *proc) waitLog(t *testing.T, msg string, v any) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(p.output(), "\n") {
			var m struct {
				Msg string `json:"msg"`
			}
			if json.Unmarshal([]byte(line), &m) == nil && m.Msg == msg {
				if err := json.Unmarshal([]byte(line), v); err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				return
			}
		}
		if p.cmd.ProcessState != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %q in the output of %s:\n%s", msg, p.cmd.Path, tailStr(p.output(), 4000))
}

// startEnv starts one of the test's binaries with env added to the
// test's environment.
func startEnv(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	return startCmd(t, name, env, exec.Command(filepath.Join(bins, name), args...))
}

// startCmd starts cmd, one of the test's binaries (name) however it is
// run, and stops it (SIGTERM, then SIGKILL) when the test ends.
func startCmd(t *testing.T, name string, env []string, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd}
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = p.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(40 * time.Second):
				_ = p.cmd.Process.Kill()
				<-done
			}
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, tailStr(p.output(), 6000))
		}
	})
	return p
}

func tailStr(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s", d, what)
}

// waitSandboxesGone waits until runsc lists none of the worker's
// sandboxes. A job's result is reported while its sandbox is torn down, so
// the last one may still be going when its job reads as ended; one that
// outlives the bound is a leak.
func waitSandboxesGone(t *testing.T, s *stack) {
	t.Helper()
	waitFor(t, "every sandbox to be torn down after its job ended", 30*time.Second, func() bool {
		return runscList(t, s.workerSB) == 0
	})
}

// stack is one API, one worker and their Redis and ledger.
type stack struct {
	t        *testing.T
	redis    string
	redisSrv *testenv.RedisServer // to stop and start Redis mid-test
	// How the API (api) and the worker (worker) are told where Redis is
	// and its credentials: flags and environment.
	redisFor map[string]redisAccess
	db       string
	// dbEnv passes a ledger whose URL carries a password (PostgreSQL)
	// the way an operator must: RENDERBOX_DB, not -db.
	dbEnv     []string
	apiArgs   []string // what every API of the stack is started with
	base      string
	metrics   string // the API's /metrics, on a listener of its own
	api       *proc
	worker    *proc
	workerSB  sandbox.Config                               // the worker's private state dir and cgroup parent
	workerCmd func(worker string, args []string) *exec.Cmd // stackOpts.workerCmd
	client    *client
}

type stackOpts struct {
	apiArgs    []string
	workerArgs []string
	persist    bool
	fsync      string // appendfsync when persist: "always" (default) or "everysec"
	maxmemory  string // Redis's maxmemory, e.g. "24mb" (testenv's default when "")
	noWorker   bool   // jobs stay queued
	// workerCmd, when set, makes the command that runs the worker binary
	// with args (to start it as a service manager would).
	workerCmd func(worker string, args []string) *exec.Cmd
	// postgres puts the ledger in a private PostgreSQL server (shared by
	// every API the test starts) instead of a SQLite file.
	postgres bool
	// redis runs Redis with a password or TLS; access then says how
	// each binary gets them (default: -redis host:port, for both).
	redis  testenv.RedisConfig
	access func(rs *testenv.RedisServer, dir string) map[string]redisAccess
}

// redisAccess is how one binary is pointed at Redis.
type redisAccess struct {
	args []string // e.g. -redis ADDR -redis-password-file F
	env  []string // e.g. RENDERBOX_REDIS_PASSWORD=…
}

func newStack(t *testing.T, o stackOpts) *stack {
	t.Helper()
	rc := o.redis
	rc.Persist, rc.Fsync, rc.MaxMemory = o.persist, o.fsync, o.maxmemory
	rs := testenv.StartRedis(t, rc)
	s := &stack{t: t, redis: rs.Addr, redisSrv: rs, db: filepath.Join(t.TempDir(), "ledger.db")}
	plain := redisAccess{args: []string{"-redis", s.redis}}
	s.redisFor = map[string]redisAccess{"api": plain, "worker": plain}
	if o.access != nil {
		s.redisFor = o.access(rs, t.TempDir())
	}
	if o.postgres {
		s.db = testenv.StartPostgres(t).NewDatabase(t)
		s.dbEnv = []string{"RENDERBOX_DB=" + s.db}
		// No directory beside the ledger: every replica names the key.
		s.apiArgs = []string{"-webhook-secret-file", filepath.Join(t.TempDir(), "webhook.key")}
	}
	s.workerCmd = o.workerCmd
	if !o.noWorker {
		s.startWorker(o.workerArgs...)
	}
	s.startAPI(o.apiArgs...)
	if o.noWorker {
		// /readyz is 503 without a worker (it would only queue jobs):
		// ready but for that is what such a stack can be.
		s.waitReadyBut("the api to answer with Redis and the ledger up (no worker in this stack)", "none")
	} else {
		s.waitReadyBut("the api to be ready", "")
	}
	s.client = newClient(t, s.base)
	return s
}

// startAPI starts the API on fresh addresses with the stack's Redis and
// ledger: the stack's API (s.api, s.base), started again after a kill.
func (s *stack) startAPI(extra ...string) {
	s.t.Helper()
	r := s.launchAPI(extra...)
	s.api, s.base, s.metrics = r.api, r.base, r.metrics
	if s.client != nil {
		s.client = newClient(s.t, s.base)
	}
}

// replica is an API process beside the stack's own.
type replica struct {
	api     *proc
	base    string
	metrics string
	client  *client
}

// startReplica starts another API on the stack's Redis and ledger — a
// second replica when the ledger is PostgreSQL — and waits until it is
// ready.
func (s *stack) startReplica(extra ...string) *replica {
	s.t.Helper()
	r := s.launchAPI(extra...)
	waitFor(s.t, "the second api to be ready", 20*time.Second, func() bool {
		if r.api.cmd.ProcessState != nil {
			s.t.Fatalf("api exited:\n%s", r.api.output())
		}
		rd, err := readyz(r.base)
		return err == nil && rd.status == 200
	})
	r.client = newClient(s.t, r.base)
	return r
}

func (s *stack) launchAPI(extra ...string) *replica {
	s.t.Helper()
	ra := s.redisFor["api"]
	// Port 0: the API binds what the kernel gives it and logs it. A port
	// picked here and bound there could be taken in between (by an
	// outgoing connection's ephemeral port, or picked twice).
	args := []string{"serve", "-addr", "127.0.0.1:0", "-metrics-addr", "127.0.0.1:0"}
	if s.dbEnv == nil {
		args = append(args, "-db", s.db)
	}
	args = append(append(append(args, ra.args...), s.apiArgs...), extra...)
	p := startEnv(s.t, "api", append(append([]string{}, ra.env...), s.dbEnv...), args...)
	var bound struct {
		Addr        string `json:"addr"`
		MetricsAddr string `json:"metrics_addr"`
	}
	p.waitLog(s.t, "api listening", &bound)
	return &replica{api: p, base: "http://" + bound.Addr, metrics: "http://" + bound.MetricsAddr + "/metrics"}
}

// waitReadyBut waits until /readyz answers with every check ok but the
// workers' check, which must be workers ("" means ok too: 200).
func (s *stack) waitReadyBut(what, workers string) {
	s.t.Helper()
	waitFor(s.t, what, 20*time.Second, func() bool {
		if s.api.cmd.ProcessState != nil {
			s.t.Fatalf("api exited:\n%s", s.api.output())
		}
		r, err := readyz(s.base)
		if err != nil {
			return false
		}
		if workers == "" {
			return r.status == 200
		}
		return r.status == 503 && r.Checks["redis"] == "ok" && r.Checks["ledger"] == "ok" && r.Checks["workers"] == workers
	})
}

// ready is a /readyz answer.
type ready struct {
	status int
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
	Reason string            `json:"reason"`
}

func readyz(base string) (ready, error) {
	var r ready
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	r.status = resp.StatusCode
	return r, json.NewDecoder(resp.Body).Decode(&r)
}

// apiMemoryGrowth runs attack and returns how far the API's peak resident
// memory (VmHWM) rose above its resident memory before it: an upper bound
// on what the attack made the API hold, spikes between samples included.
// The peak is reset to the resident memory first (clear_refs 5), so that
// what the test did before the attack does not count.
func (s *stack) apiMemoryGrowth(attack func()) int64 {
	s.t.Helper()
	pid := s.api.cmd.Process.Pid
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		s.t.Fatalf("resetting the API's peak memory: %v", err)
	}
	before, err := vmRSS(pid)
	if err != nil {
		s.t.Fatal(err)
	}
	attack()
	peak, err := procStatusBytes(pid, "VmHWM")
	if err != nil {
		s.t.Fatal(err)
	}
	return peak - before
}

// scrape returns the API's /metrics, read from the metrics listener.
func (s *stack) scrape() string {
	s.t.Helper()
	return scrape(s.t, s.metrics)
}

// scrape reads the /metrics page at url.
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("scraping %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startWorker starts a worker with a private state dir and cgroup parent
// (checked for leftovers when the test ends) and waits until it serves.
func (s *stack) startWorker(extra ...string) *proc {
	t := s.t
	t.Helper()
	if s.workerSB.StateDir == "" {
		s.workerSB = testenv.Manager(t, sandbox.Config{}).Config()
	}
	ra := s.redisFor["worker"]
	args := append([]string{"serve", "-rootfs", testenv.RootfsTree(t),
		"-state-dir", s.workerSB.StateDir, "-cgroup-parent", s.workerSB.CgroupParent, "-runsc", s.workerSB.Runsc,
		// The pool is off unless a test turns it on (extra comes last and
		// wins): most tests are about one job's sandbox, and a pool's
		// boots in the background would share the two cores with them.
		"-metrics-addr", "", "-concurrency", "2", "-pool-size", "none"}, ra.args...)
	args = append(args, extra...)
	cmd := exec.Command(filepath.Join(bins, "worker"), args...)
	if s.workerCmd != nil {
		cmd = s.workerCmd(filepath.Join(bins, "worker"), args)
	}
	w := startCmd(t, "worker", ra.env, cmd)
	waitFor(t, "the worker to pass its checks and serve", 60*time.Second, func() bool {
		if w.cmd.ProcessState != nil {
			t.Fatalf("worker exited:\n%s", w.output())
		}
		return strings.Contains(w.output(), "worker ready")
	})
	s.worker = w
	return w
}

// key creates an API key and returns its secret.
func (s *stack) key(name string) string {
	s.t.Helper()
	return s.newKey(name)
}

// adminKey creates an admin API key and returns its secret.
func (s *stack) adminKey(name string) string {
	s.t.Helper()
	return s.newKey("-admin", name)
}

func (s *stack) newKey(args ...string) string {
	s.t.Helper()
	cmd := exec.Command(filepath.Join(bins, "api"), append([]string{"keys", "create", "-db", s.db}, args...)...)
	if s.dbEnv != nil {
		cmd = exec.Command(filepath.Join(bins, "api"), append([]string{"keys", "create"}, args...)...)
		cmd.Env = append(os.Environ(), s.dbEnv...)
	}
	out, err := cmd.Output()
	if err != nil {
		s.t.Fatalf("api keys create: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// client makes requests and checks every response against openapi.yaml.
type client struct {
	t      *testing.T
	base   string
	router routers.Router
}

func newClient(t *testing.T, base string) *client {
	doc, err := openapi3.NewLoader().LoadFromData(renderbox.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is invalid: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: base}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &client{t: t, base: base, router: router}
}

type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r *response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.Body, err)
	}
}

func (r *response) problemCode(t *testing.T) string {
	t.Helper()
	var p struct {
		Code string `json:"code"`
	}
	r.json(t, &p)
	return p.Code
}

func (c *client) do(method, path, key, contentType string, body []byte, header map[string]string) *response {
	c.t.Helper()
	r, err := c.try(nil, method, path, key, contentType, body, header)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// try is do for goroutines other than the test's own, where t.Fatal must
// not be called: a transport error is returned instead. The response is
// still checked against openapi.yaml. hc nil means http.DefaultClient.
func (c *client) try(hc *http.Client, method, path, key, contentType string, body []byte, header map[string]string) (*response, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the body: %w", method, path, err)
	}
	c.validate(req, body, resp, data)
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// validate checks a response against the contract: its route, status,
// content type and body schema (where a property the schema does not name
// fails: additionalProperties: false), and records the properties it
// carried for TestContractCoverage.
func (c *client) validate(req *http.Request, reqBody []byte, resp *http.Response, body []byte) {
	c.t.Helper()
	vreq, _ := http.NewRequest(req.Method, req.URL.String(), bytes.NewReader(reqBody))
	vreq.Header = req.Header.Clone()
	route, params, err := c.router.FindRoute(vreq)
	if err != nil {
		c.t.Errorf("%s %s is not in openapi.yaml: %v", req.Method, req.URL.Path, err)
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, ExcludeRequestBody: true}}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(body)), Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		c.t.Errorf("%s %s → %d does not match openapi.yaml: %v\nbody: %s", req.Method, req.URL.Path, resp.StatusCode, err, tailStr(string(body), 500))
		return
	}
	recordAnswer(route, resp, body)
}

func multipartBody(fields map[string]string, file []byte) (string, []byte) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	fw, _ := mw.CreateFormFile("file", "input")
	_, _ = fw.Write(file)
	_ = mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

// runscList counts the containers runsc knows in a state dir.
func runscList(t *testing.T, cfg sandbox.Config) int {
	out, err := exec.Command(cfg.Runsc, "--root="+filepath.Join(cfg.StateDir, "runsc"), "list", "-quiet").Output()
	if err != nil {
		return -1
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			n++
		}
	}
	return n
}

func pngEncode(w io.Writer, img image.Image) error { return png.Encode(w, img) }
