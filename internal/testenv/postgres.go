//go:build !unit

package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresServer is a private PostgreSQL server: a cluster made by initdb
// in a temporary directory, listening on a free loopback port only, with
// a superuser "renderbox" whose password is random. Tests make a fresh
// database each with NewDatabase.
type PostgresServer struct {
	// URL is the superuser's URL of the "postgres" database, password
	// included.
	URL string

	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the server has exited
	log  *bytes.Buffer
	mu   sync.Mutex // guards log while the server writes it
	n    atomic.Int64
}

// StartPostgres starts a private PostgreSQL server for the test and stops
// it, removing its files, when the test ends. It fails the test (never
// skips it) when Debian's postgresql package is missing.
func StartPostgres(t testing.TB) *PostgresServer {
	t.Helper()
	return StartPostgresOn(t, "", "")
}

// StartPostgresOn is StartPostgres listening on host too (besides
// loopback) and letting clients from network (a CIDR) in with the
// password: a test's private network, whose hosts are other network
// namespaces.
func StartPostgresOn(t testing.TB, host, network string) *PostgresServer {
	t.Helper()
	p, err := newPostgres(host, network)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stopping PostgreSQL: %v", err)
		}
	})
	return p
}

// PostgresBin returns the directory of the newest PostgreSQL's binaries
// under /usr/lib/postgresql/*/bin (Debian's layout: they are not on PATH).
func PostgresBin() (string, error) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(found) == 0 {
		return "", errors.New("PostgreSQL is missing (no /usr/lib/postgresql/*/bin/postgres); install it with: apt-get install -y postgresql (or: make setup)")
	}
	version := func(p string) int {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
		return v
	}
	sort.Slice(found, func(i, j int) bool { return version(found[i]) > version(found[j]) })
	return filepath.Dir(found[0]), nil
}

// NewPostgres starts a private PostgreSQL server; Stop ends it. Prefer
// StartPostgres in a test; NewPostgres is for a server that a package's
// tests share (started once, stopped from TestMain).
//
// PostgreSQL refuses to run as root, so when the tests run as root the
// server runs as the postgres user Debian's package makes, in a directory
// handed to that user.
func NewPostgres() (*PostgresServer, error) { return newPostgres("", "") }

func newPostgres(host, network string) (*PostgresServer, error) {
	bin, err := PostgresBin()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("PostgreSQL cannot run as root and there is no postgres user (%v); install it with: apt-get install -y postgresql (or: make setup)", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	dir, err := os.MkdirTemp("", "renderbox-pg-")
	if err != nil {
		return nil, err
	}
	p := &PostgresServer{dir: dir, done: make(chan struct{}), log: new(bytes.Buffer)}
	if err := p.start(bin, cred, host, network); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

func (p *PostgresServer) start(bin string, cred *syscall.Credential, host, network string) error {
	if cred != nil {
		if err := os.Chown(p.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	password := hex.EncodeToString(b[:])
	pwfile := filepath.Join(p.dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o600); err != nil {
		return err
	}
	if cred != nil {
		if err := os.Chown(pwfile, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
	}
	data := filepath.Join(p.dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "renderbox", "--pwfile", pwfile,
		"--auth", "scram-sha-256", "-E", "UTF8", "--locale", "C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	_ = os.Remove(pwfile)
	listen := "127.0.0.1"
	if host != "" {
		listen += "," + host
		hba, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(hba, "host all all %s scram-sha-256\n", network)
		if err := errors.Join(err, hba.Close()); err != nil {
			return err
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	// Loopback TCP only, no Unix socket; durability off: a test's data
	// dies with it, and fsync on two shared cores is most of the time.
	p.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses="+listen, "-c", "unix_socket_directories=",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "shared_buffers=32MB")
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	p.cmd.Stdout, p.cmd.Stderr = (*lockedWriter)(p), (*lockedWriter)(p)
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()

	p.URL = (&url.URL{Scheme: "postgres", User: url.UserPassword("renderbox", password),
		Host: fmt.Sprintf("127.0.0.1:%d", port), Path: "/postgres", RawQuery: "sslmode=disable"}).String()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, p.URL)
		cancel()
		if err == nil {
			c.Close(context.Background())
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("postgres exited at start:\n%s", p.logText())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections on port %d within 30s (%v):\n%s", port, err, p.logText())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// NewDatabase makes an empty database for the test on the server and
// returns its URL. It is dropped when the test ends. Its collation is
// ICU's en-US, not the cluster's C: an operator's database usually sorts
// text for people, and code that needs byte order must say so.
func (p *PostgresServer) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("test_%d", p.n.Add(1))
	p.exec(t, "CREATE DATABASE "+name+" TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'")
	t.Cleanup(func() { p.exec(t, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	u, _ := url.Parse(p.URL)
	u.Path = "/" + name
	return u.String()
}

func (p *PostgresServer) exec(t testing.TB, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, p.URL)
	if err != nil {
		t.Fatalf("connecting to the test PostgreSQL: %v", err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// Stop shuts the server down (fast shutdown: SIGINT), waits for it and
// removes its files.
func (p *PostgresServer) Stop() error {
	var err error
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			err = fmt.Errorf("postgres did not stop within 15s of SIGINT:\n%s", p.logText())
		}
	}
	return errors.Join(err, os.RemoveAll(p.dir))
}

func (p *PostgresServer) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// lockedWriter is the server's output, kept for failure messages.
type lockedWriter PostgresServer

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.log.Write(b)
}
