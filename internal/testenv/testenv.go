//go:build !unit

package testenv

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/rootfs"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/wire"
)

// RootfsTree returns the built rootfs tree ($RENDERBOX_ROOTFS or
// /var/lib/renderbox/rootfs/current).
func RootfsTree(t testing.TB) string {
	t.Helper()
	tree := os.Getenv("RENDERBOX_ROOTFS")
	if tree == "" {
		tree = "/var/lib/renderbox/rootfs/current"
	}
	if _, err := os.Stat(filepath.Join(rootfs.Dir(tree), rootfs.AgentPath)); err != nil {
		t.Fatalf("the renderer rootfs is missing at %s (%v); build it with: make rootfs (as root)", tree, err)
	}
	return tree
}

// Runsc returns the runsc binary ($RENDERBOX_RUNSC, $PATH or
// /usr/local/bin/runsc) after checking its version.
func Runsc(t testing.TB) string {
	t.Helper()
	p, err := sandbox.Locate(os.Getenv("RENDERBOX_RUNSC"))
	if err != nil {
		t.Fatalf("%v; or run: make setup", err)
	}
	if _, err := sandbox.CheckVersion(context.Background(), p); err != nil {
		t.Fatalf("%v", err)
	}
	return p
}

// GoferRoot, as sandbox.Config.RootfsImage, asks Manager for sandboxes
// that mount the tree through the gofer instead of its image.
const GoferRoot = "gofer"

var (
	imageOnce sync.Once
	imagePath string
	imageErr  error
)

// RootfsImage returns the built tree's EROFS image, verified once per test
// process, as the worker runs it.
func RootfsImage(t testing.TB) string {
	t.Helper()
	tree := RootfsTree(t)
	imageOnce.Do(func() {
		m, err := rootfs.ReadManifest(tree)
		if err != nil {
			imageErr = err
			return
		}
		imagePath, _, imageErr = rootfs.VerifyImage(tree, m)
		if imageErr == nil && imagePath == "" {
			imageErr = fmt.Errorf("the rootfs tree %s has no image (make it with: make rootfs, or bin/worker rootfs image %s; needs erofs-utils)", tree, tree)
		}
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	return imagePath
}

// Manager returns a sandbox manager with a private state dir and cgroup
// parent. When the test ends it fails the test if any container, bundle or
// cgroup is left over, then removes the parent cgroup.
func Manager(t testing.TB, cfg sandbox.Config) *sandbox.Manager {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("sandbox tests must run as root (runsc creates cgroups); run them with sudo or as root")
	}
	if err := sandbox.CheckCgroups(); err != nil {
		t.Fatal(err)
	}
	cfg.Runsc = Runsc(t)
	if cfg.Rootfs == "" {
		cfg.Rootfs = rootfs.Dir(RootfsTree(t))
		switch cfg.RootfsImage {
		case "":
			cfg.RootfsImage = RootfsImage(t)
		case GoferRoot:
			cfg.RootfsImage = ""
		}
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	if cfg.StateDir == "" {
		// runsc's state lives under /run like in production; t.TempDir
		// paths can be too long for the sockets runsc makes.
		cfg.StateDir = "/run/renderbox-test/" + suffix
	}
	if cfg.CgroupParent == "" {
		cfg.CgroupParent = "renderbox-test-" + suffix
	}
	m, err := sandbox.NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		left, err := m.Leftovers(ctx)
		if err != nil {
			t.Errorf("listing leftovers: %v", err)
		}
		if len(left) > 0 {
			t.Errorf("sandboxes left behind after the test: %v", left)
			_, _ = m.Reap(ctx)
		}
		for _, d := range sandbox.ParentCgroupDirs(cfg.CgroupParent) {
			_ = os.Remove(d)
		}
		if err := sandbox.RemoveStateDir(cfg.StateDir); err != nil {
			t.Errorf("removing the state dir: %v", err)
		}
	})
	return m
}

// RootfsDir returns the rootfs/ directory of the built tree.
func RootfsDir(t testing.TB) string { return rootfs.Dir(RootfsTree(t)) }

// Redis starts a private redis-server on a free loopback port for the test
// (no persistence unless persist) and returns its address.
func Redis(t testing.TB, persist bool) string {
	t.Helper()
	return StartRedis(t, RedisConfig{Persist: persist}).Addr
}

// RedisSent returns the bytes the Redis behind rdb sent its clients while
// f ran (INFO's total_net_output_bytes), less the answer to the INFO that
// took the first count: what f cost Redis, for a test to bound. Run it on
// a Redis of the test's own, or other clients are counted too.
func RedisSent(t testing.TB, rdb redis.UniversalClient, f func()) int64 {
	t.Helper()
	sent := func() int64 {
		info, err := rdb.Info(context.Background(), "stats").Result()
		if err != nil {
			t.Fatalf("reading Redis's INFO stats: %v", err)
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "total_net_output_bytes:"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err == nil {
					return n
				}
			}
		}
		t.Fatalf("Redis's INFO stats has no total_net_output_bytes: %q", info)
		return 0
	}
	a := sent()
	b := sent() // counts a's answer: INFO's own cost
	f()
	return sent() - b - (b - a)
}

// RedisConfig says how StartRedis runs redis-server.
type RedisConfig struct {
	// Persist turns the append-only file on.
	Persist bool
	// Fsync is appendfsync when Persist is on: "always" (the default: a
	// write is on disk before Redis acknowledges it) or "everysec"
	// (production's, see deploy/redis.conf: a write is handed to the
	// kernel before it is acknowledged — unless a slow fsync makes Redis
	// postpone it, for up to 2s — so a killed Redis loses next to
	// nothing; a host crash loses up to a second or two).
	Fsync string
	// MaxMemory is Redis's maxmemory, e.g. "16mb". Default "256mb": like
	// production (deploy/redis.conf), a test's Redis is bounded and
	// refuses writes past the bound (noeviction) rather than grow.
	MaxMemory string
	// Password, when set, is Redis's requirepass: clients must AUTH.
	Password string
	// TLS serves TLS only (tls-port, no plain port) with a certificate
	// for 127.0.0.1 and localhost, signed by a CA made for the test
	// (CAFile).
	TLS bool
	// Host is the one address Redis binds, and Addr's host. Default
	// 127.0.0.1; a test's private network gives its bridge's address.
	Host string
}

// RedisServer is a private redis-server that a test can stop and start
// again on the same port and data directory, to see what the rest of the
// system makes of an outage and of what Redis kept.
type RedisServer struct {
	// Addr is host:port; it stays the same across restarts.
	Addr string
	// Dir is the data directory (the append-only file when persist is on).
	Dir string
	// Password is requirepass ("" for none).
	Password string
	// CAFile is the PEM certificate of the CA that signed the server's
	// certificate when it serves TLS, else "".
	CAFile string

	t    testing.TB
	bin  string
	args []string
	conf string // config read from stdin (the password)
	mu   sync.Mutex
	cmd  *exec.Cmd // nil while stopped
	// exited gets cmd's exit (its Wait), once.
	exited chan error
}

// redisPorts serialises choosing a port and binding it among the
// package's Redis servers: tests that run in parallel must not be given
// one port between its probe and redis-server's bind.
var redisPorts sync.Mutex

// StartRedis starts a private redis-server on a free loopback port and
// stops it when the test ends.
func StartRedis(t testing.TB, cfg RedisConfig) *RedisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is missing; install it with: apt-get install -y redis-server (or: make setup)")
	}
	host := cmp.Or(cfg.Host, "127.0.0.1")
	r := &RedisServer{Dir: t.TempDir(), Password: cfg.Password, t: t, bin: bin}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.cmd != nil {
			_ = r.cmd.Process.Kill()
			<-r.exited
			r.cmd = nil
		}
	})
	redisPorts.Lock()
	defer redisPorts.Unlock()
	// A process outside this package (an API or worker a test started)
	// may bind the port between the probe and redis-server's bind; then
	// redis-server exits at once and another port is tried.
	for try := 0; try < 5; try++ {
		if err = r.startOn(host, cfg); err == nil {
			return r
		}
	}
	t.Fatalf("redis-server: %v", err)
	return nil
}

// startOn starts the server on a free port of host.
func (r *RedisServer) startOn(host string, cfg RedisConfig) error {
	t := r.t
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	r.Addr = net.JoinHostPort(host, strconv.Itoa(port))
	if cfg.MaxMemory == "" {
		cfg.MaxMemory = "256mb"
	}
	r.args = []string{"--port", strconv.Itoa(port), "--bind", host, "--dir", r.Dir, "--save", "",
		"--maxmemory", cfg.MaxMemory, "--maxmemory-policy", "noeviction", "--protected-mode", "yes", "--appendonly", "no"}
	if cfg.Persist {
		if cfg.Fsync == "" {
			cfg.Fsync = "always"
		}
		r.args = append(r.args[:len(r.args)-1], "yes", "--appendfsync", cfg.Fsync)
	}
	if cfg.Password != "" {
		// From a config file on stdin rather than argv, as production
		// keeps it out of ps.
		r.conf = "requirepass " + strconv.Quote(cfg.Password) + "\n"
	}
	if cfg.TLS {
		ca, cert, key := TLSFiles(t, r.Dir, host, "localhost")
		r.CAFile = ca
		r.args = append(r.args, "--port", "0", "--tls-port", strconv.Itoa(port), "--tls-cert-file", cert,
			"--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.start()
}

// Start starts the server (again) on its port and data directory and
// returns once it answers PING, i.e. has loaded what it persisted.
func (r *RedisServer) Start() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		r.t.Fatalf("redis-server on %s is already running", r.Addr)
	}
	if err := r.start(); err != nil {
		r.t.Fatal(err)
	}
}

// start starts the server and waits for its PONG; an error when it exits
// first or does not answer. r.mu is held.
func (r *RedisServer) start() error {
	// umask 077, as scripts/redis.sh and the deploy unit run it: the
	// append-only files are the owner's alone.
	args := r.args
	if r.conf != "" {
		args = append([]string{"-"}, args...) // "-": read the config from stdin
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", `umask 077 && exec "$0" "$@"`, r.bin}, args...)...)
	cmd.Stdin = strings.NewReader(r.conf)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("redis-server on %s exited at start (%v): %s", r.Addr, err, lastLine(out.String()))
		default:
		}
		if r.pong() {
			r.cmd, r.exited = cmd, exited
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-exited
	return fmt.Errorf("redis-server did not answer PING on %s within 10s", r.Addr)
}

// lastLine is s's last non-empty line.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// Stop shuts the server down cleanly (SIGTERM: Redis flushes its
// append-only file and exits 0) and waits for it to exit.
func (r *RedisServer) Stop() { r.stop(syscall.SIGTERM) }

// Kill kills the server with SIGKILL: no shutdown, no final flush.
func (r *RedisServer) Kill() { r.stop(syscall.SIGKILL) }

func (r *RedisServer) stop(sig syscall.Signal) {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		r.t.Fatalf("redis-server on %s is not running", r.Addr)
	}
	cmd := r.cmd
	r.cmd = nil
	if err := cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("signalling redis-server: %v", err)
	}
	done := r.exited
	select {
	case err := <-done:
		if sig == syscall.SIGTERM && err != nil {
			r.t.Fatalf("redis-server did not shut down cleanly on SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		r.t.Fatalf("redis-server did not exit within 15s of %v", sig)
	}
}

// Options are a client's options for the server: its address, password
// and, over TLS, its CA.
func (r *RedisServer) Options() *redis.Options {
	r.t.Helper()
	o := &redis.Options{Addr: r.Addr, Password: r.Password, MaxRetries: -1}
	if r.CAFile != "" {
		pem, err := os.ReadFile(r.CAFile)
		if err != nil {
			r.t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		o.TLSConfig = &tls.Config{RootCAs: pool, ServerName: r.host(), MinVersion: tls.VersionTLS12}
	}
	return o
}

func (r *RedisServer) host() string {
	h, _, _ := net.SplitHostPort(r.Addr)
	return h
}

// pong reports whether the server answers PING (not, say, LOADING).
func (r *RedisServer) pong() bool {
	o := r.Options()
	o.DialTimeout, o.ReadTimeout = time.Second, time.Second
	c := redis.NewClient(o)
	defer c.Close()
	return c.Ping(context.Background()).Err() == nil
}

// Tool runs a poppler tool (pdftotext, pdfinfo, …) on a PDF inside a
// sandbox — parsing a renderer's output is untrusted work too — and returns
// its standard output.
func Tool(t testing.TB, m *sandbox.Manager, prog string, pdf []byte, args ...string) string {
	t.Helper()
	argv := append([]string{"/usr/bin/" + prog}, args...)
	argv = append(argv, wire.InputDir+"/in.pdf")
	if prog == "pdftotext" {
		argv = append(argv, "-") // to stdout
	}
	res, err := m.Run(context.Background(), sandbox.Job{
		Request: wire.Request{
			Mode: wire.ModeRender, InputName: "in.pdf", InputSize: int64(len(pdf)),
			Steps: []wire.Step{{Argv: argv, Stdout: wire.OutputDir + "/stdout.txt"}},
			Env:   []string{"PATH=/usr/bin:/bin"},
		},
		Input: bytes.NewReader(pdf),
	})
	if err != nil {
		t.Fatalf("%s: %v", prog, err)
	}
	return string(res.Response.Files[0].Data)
}

// PDFText extracts a PDF's text in a sandbox.
func PDFText(t testing.TB, m *sandbox.Manager, pdf []byte) string {
	t.Helper()
	return Tool(t, m, "pdftotext", pdf, "-layout")
}

// Pool starts a pool of m's sandboxes with the given families and closes
// it when the test ends (testenv.Manager then checks nothing is left).
func Pool(t testing.TB, m *sandbox.Manager, fams ...sandbox.PoolFamily) *sandbox.Pool {
	t.Helper()
	return PoolWithEvents(t, m, nil, fams...)
}

// PoolWithEvents is Pool that also passes every event to onEvent.
func PoolWithEvents(t testing.TB, m *sandbox.Manager, onEvent func(sandbox.PoolEvent), fams ...sandbox.PoolFamily) *sandbox.Pool {
	t.Helper()
	p, err := m.NewPool(sandbox.PoolConfig{Families: fams, OnEvent: func(e sandbox.PoolEvent) {
		t.Logf("pool event: %+v", e)
		if onEvent != nil {
			onEvent(e)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.Start(ctx)
	t.Cleanup(func() {
		cancel()
		if err := p.Close(context.Background()); err != nil {
			t.Errorf("closing the pool: %v", err)
		}
	})
	return p
}
