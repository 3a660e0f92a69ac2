//go:build !unit

package apiserver

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/testenv"
)

// A command line api does not understand is refused with the usage and
// exit status 2 before anything is opened: "api version" once ran serve,
// which opened the live ledger and Redis.
func TestUnknownCommandsOpenNothing(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ledger.db")
	redis := listenNothing(t)
	t.Setenv("RENDERBOX_DB", db)
	t.Setenv("RENDERBOX_REDIS", redis.Addr().String())
	for _, args := range [][]string{
		{"version"}, {"nonsense"}, {"serve", "extra"}, {"keys"}, {"keys", "nonsense"},
		{"keys", "create"}, {"keys", "create", "a", "b"}, {"keys", "list", "extra"},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(context.Background(), args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "usage: api") {
			t.Errorf("api %s: got exit %d and stderr %q, want 2 and the usage", strings.Join(args, " "), code, stderr.String())
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("the ledger %s was made (stat: %v), want nothing opened", db, err)
	}
	redis.assertUntouched(t)
}

func TestVersionFlag(t *testing.T) {
	t.Setenv("RENDERBOX_DB", filepath.Join(t.TempDir(), "ledger.db"))
	for _, args := range [][]string{{"-version"}, {"serve", "-version"}} {
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), args, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "api ") || !strings.Contains(stdout.String(), "go1.") {
			t.Errorf("api %s: got exit %d, stdout %q, stderr %q; want 0 and \"api VERSION … goVERSION\"", strings.Join(args, " "), code, stdout.String(), stderr.String())
		}
	}
}

// A misspelled -db once made an empty ledger and a key in it that no API
// served: keys refuses a SQLite ledger that does not exist unless create
// is told to make it.
func TestKeysRefuseAMissingLedger(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ledgr.db")
	for _, args := range [][]string{{"keys", "create", "-db", db, "ci"}, {"keys", "list", "-db", db}, {"keys", "revoke", "-db", db, "key_x"}} {
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), args, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "does not exist") || !strings.Contains(stderr.String(), "-create") {
			t.Errorf("api %s: got exit %d and stderr %q, want 1 and a refusal naming -create", strings.Join(args, " "), code, stderr.String())
		}
		if _, err := os.Stat(db); !os.IsNotExist(err) {
			t.Fatalf("api %s made %s (stat: %v)", strings.Join(args, " "), db, err)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), []string{"keys", "create", "-create", "-db", db, "ci"}, &stdout, &stderr); code != 0 {
		t.Fatalf("keys create -create: exit %d: %s", code, stderr.String())
	}
	stdout.Reset()
	if code := Main(context.Background(), []string{"keys", "create", "-db", db, "second"}, &stdout, &stderr); code != 0 || stdout.Len() == 0 {
		t.Errorf("keys create in the ledger -create made: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// quietListener is a port that must not be dialed.
type quietListener struct{ *net.TCPListener }

func listenNothing(t *testing.T) quietListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return quietListener{ln.(*net.TCPListener)}
}

func (l quietListener) assertUntouched(t *testing.T) {
	t.Helper()
	_ = l.SetDeadline(time.Now().Add(50 * time.Millisecond))
	if c, err := l.Accept(); err == nil {
		c.Close()
		t.Errorf("%s was dialed, want nothing opened", l.Addr())
	}
}

// A -trusted-proxies that does not parse stops serve before it opens
// anything, naming the flag.
func TestTrustedProxiesChecked(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ledger.db")
	t.Setenv("RENDERBOX_DB", db)
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"serve", "-trusted-proxies", "10.0.0.0/8,proxy.internal"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "-trusted-proxies") || !strings.Contains(stderr.String(), "proxy.internal") {
		t.Errorf("got exit %d and %q, want 1 and an error naming -trusted-proxies and the bad entry", code, stderr.String())
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("the ledger was opened (stat: %v)", err)
	}
}

// serve starts against a real Redis, answers /readyz and returns nil when
// its context ends. Under the race detector (the suite's) this also holds
// serve's own goroutines to the context they were given: they once read
// ctx while serve replaced it, and the api panicked at start-up in
// cancelCtx.Done.
func TestServeStartsAndStops(t *testing.T) {
	redis := testenv.Redis(t, false)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	t.Setenv("RENDERBOX_DB", filepath.Join(t.TempDir(), "ledger.db"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var logs testenv.Buffer
	// No metrics listener: 127.0.0.1:9090, its default, may be another
	// API's on this host.
	go func() {
		done <- serve(ctx, []string{"-addr", addr, "-redis", redis, "-metrics-addr", ""}, io.Discard, &logs)
	}()
	// No worker runs here, so /readyz answers 503, but with its Redis
	// and ledger checks passing.
	testenv.Poll(t, "the api's /readyz finding Redis and the ledger", 30*time.Second, func() bool {
		res, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return strings.Contains(string(body), `"redis":"ok"`) && strings.Contains(string(body), `"ledger":"ok"`)
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve returned %v after its context ended, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not return within 20 s of its context ending")
	}
	// A clean stop is logged, its end last.
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if !strings.Contains(logs.String(), `"msg":"api stopping: no new requests; finishing those in flight","timeout_seconds":10}`) ||
		!strings.Contains(lines[len(lines)-1], `"level":"INFO","msg":"api stopped"`) {
		t.Errorf("serve's log:\n%s\nwant \"api stopping\", then \"api stopped\" last", logs.String())
	}
}
