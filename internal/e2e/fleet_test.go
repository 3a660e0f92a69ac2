package e2e

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
