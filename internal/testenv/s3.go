//go:build !unit

package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/blobs"
)

// PinnedSeaweedFS is the SeaweedFS the tests' object store runs:
// scripts/setup.sh builds its weed binary from the module proxy into
// SeaweedFSBin (it reads this line).
const PinnedSeaweedFS = "v0.0.0-20261109003541-7506e5f91cd6"

// SeaweedFSBin is where scripts/setup.sh puts weed at the pinned version.
var SeaweedFSBin = "/var/cache/renderbox/bin/weed-" + PinnedSeaweedFS

// S3Server is a private SeaweedFS ("weed mini": master, volume, filer and
// S3 gateway in one process) on free loopback ports, with its data in a
// temporary directory, one bucket and one identity whose keys are
// random. A test may stop and start it again on the same ports and data.
type S3Server struct {
	// Endpoint is the S3 gateway's host:port.
	Endpoint string
	// Bucket exists from the start.
	Bucket string
	// AccessKey and SecretKey are the identity's.
	AccessKey, SecretKey string
	// Dir holds the server's data.
	Dir string

	t    testing.TB
	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan error
	log  *bytes.Buffer
}

// StartS3 starts a private S3-compatible server for the test and stops
// it when the test ends. It fails (never skips) when weed is missing.
func StartS3(t testing.TB) *S3Server {
	t.Helper()
	return StartS3On(t, "127.0.0.1")
}

// StartS3On is StartS3 listening on host (a test's private network,
// whose hosts are other network namespaces) rather than loopback.
func StartS3On(t testing.TB, host string) *S3Server {
	t.Helper()
	if _, err := os.Stat(SeaweedFSBin); err != nil {
		t.Fatalf("SeaweedFS (weed %s) is missing at %s; build it with: make setup-tests (scripts/setup.sh --tests builds it from the Go module proxy)", PinnedSeaweedFS, SeaweedFSBin)
	}
	s := &S3Server{Bucket: "renderbox-test", Dir: t.TempDir(), t: t, AccessKey: "rbx" + randomHex(8), SecretKey: randomHex(20)}
	conf, _ := json.Marshal(map[string]any{"identities": []any{map[string]any{
		"name":        "renderbox",
		"credentials": []any{map[string]string{"accessKey": s.AccessKey, "secretKey": s.SecretKey}},
		"actions":     []string{"Admin", "Read", "Write", "List", "Tagging"},
	}}})
	confFile := filepath.Join(s.Dir, "s3.json")
	if err := os.WriteFile(confFile, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(s.Dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	// Every listener on a port of its own (gRPC ones too: weed's default
	// is the HTTP port + 10000), the extras off, and no telemetry.
	p := freePorts(t, host, 8)
	s.Endpoint = net.JoinHostPort(host, strconv.Itoa(p[0]))
	s.args = []string{"mini", "-dir=" + data, "-ip=" + host, "-ip.bind=" + host,
		"-s3.config=" + confFile, "-bucket=" + s.Bucket, "-master.telemetry=false",
		"-webdav=false", "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
		"-s3.port=" + strconv.Itoa(p[0]), "-s3.port.grpc=" + strconv.Itoa(p[1]),
		"-master.port=" + strconv.Itoa(p[2]), "-master.port.grpc=" + strconv.Itoa(p[3]),
		"-volume.port=" + strconv.Itoa(p[4]), "-volume.port.grpc=" + strconv.Itoa(p[5]),
		"-filer.port=" + strconv.Itoa(p[6]), "-filer.port.grpc=" + strconv.Itoa(p[7]),
		"-filer.localSocket=" + filepath.Join(s.Dir, "filer.sock"), "-s3.localSocket=" + filepath.Join(s.Dir, "s3.sock"),
	}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.cmd != nil {
			_ = s.cmd.Process.Kill()
			<-s.done
			s.cmd = nil
		}
	})
	s.Start()
	return s
}

// freePorts returns n ports of host free right now.
func freePorts(t testing.TB, host string, n int) []int {
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Start starts the server (again) and returns once its bucket answers.
func (s *S3Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.t.Fatalf("weed on %s is already running", s.Endpoint)
	}
	s.log = &bytes.Buffer{}
	cmd := exec.Command(SeaweedFSBin, s.args...)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting weed: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	st := s.store()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			s.t.Fatalf("weed exited at start (%v): %s", err, tailOf(s.log.String(), 2000))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := st.Ping(ctx)
		if err == nil {
			// The bucket answers; a write proves the volume is up too.
			err = st.Put(ctx, "testenv-probe", []byte("ok"), time.Minute)
		}
		cancel()
		if err == nil {
			s.cmd, s.done = cmd, done
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
	s.t.Fatalf("weed's S3 gateway on %s did not answer within 60s: %s", s.Endpoint, tailOf(s.log.String(), 2000))
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// Stop stops the server (SIGTERM, SIGKILL after 5s: weed mini may wait
// out its components' grace) and waits for it to exit.
func (s *S3Server) Stop() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatalf("weed on %s is not running", s.Endpoint)
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	s.cmd = nil
}

// URL is the -blobs value of the bucket under prefix.
func (s *S3Server) URL(prefix string) string {
	return "s3://" + s.Bucket + "/" + url.PathEscape(prefix) + "?endpoint=" + s.Endpoint + "&secure=false&region=us-east-1"
}

// Env is the environment that gives a binary the identity's keys.
func (s *S3Server) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s.SecretKey}
}

// Store is a client of the bucket under prefix, with the identity's keys.
func (s *S3Server) Store(prefix string) *blobs.S3 {
	s.t.Helper()
	st, err := blobs.NewS3With(blobs.Config{URL: s.URL(prefix)}, s.AccessKey, s.SecretKey)
	if err != nil {
		s.t.Fatal(err)
	}
	return st
}

func (s *S3Server) store() *blobs.S3 { return s.Store("") }

// Log is what the server wrote so far.
func (s *S3Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.log)
}
