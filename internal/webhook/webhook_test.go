package webhook

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/testenv"
)

func TestPolicyRefusesEverythingButPublic(t *testing.T) {
	var p Policy
	for _, a := range []string{
		"127.0.0.1", "127.9.9.9", "::1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254",
		"fe80::1", "fc00::1", "fd12::1", "0.0.0.0", "0.1.2.3", "::", "100.64.0.1", "192.0.0.8",
		"198.18.0.1", "224.0.0.1", "239.1.1.1", "255.255.255.255", "240.0.0.1", "ff02::1",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::", "2001:db8::1",
		"2001::1", "192.0.2.1", "fe80::1%eth0",
		// IPv4-compatible, IPv4-mapped (even of a public address),
		// site-local, local-use NAT64 and the 6to4 relay anycast.
		"::127.0.0.1", "::8.8.8.8", "::ffff:8.8.8.8", "fec0::1", "feff::1", "64:ff9b:1::a00:1", "192.88.99.1",
	} {
		if err := p.Check(netip.MustParseAddr(a)); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want refused", a, err)
		}
	}
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "151.101.1.69", "2606:4700:4700::1111", "2a00:1450:4001::1", "192.88.100.1", "fe00::1"} {
		if err := p.Check(netip.MustParseAddr(a)); err != nil {
			t.Errorf("%s: %v, want allowed", a, err)
		}
	}
}

func TestPolicyAllowList(t *testing.T) {
	allow, err := ParseAllow("10.0.0.0/8, 127.0.0.2 ,fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	p := Policy{Allow: allow}
	for a, ok := range map[string]bool{"10.9.9.9": true, "127.0.0.2": true, "::ffff:127.0.0.2": true, "fd00::5": true,
		"127.0.0.1": false, "192.168.0.1": false, "169.254.169.254": false} {
		if err := p.Check(netip.MustParseAddr(a)); (err == nil) != ok {
			t.Errorf("%s: %v, want allowed=%v", a, err, ok)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "localhost", "10.0.0.1/8/8"} {
		if _, err := ParseAllow(bad); err == nil {
			t.Errorf("ParseAllow(%q) succeeded", bad)
		}
	}
}

func TestCheckURL(t *testing.T) {
	var p Policy
	for _, ok := range []string{"https://hooks.example.com/renderbox?x=1", "http://8.8.8.8:8080/h", "https://[2606:4700::1]/h"} {
		if _, err := p.CheckURL(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		"ftp://example.com/":                                 "http or https",
		"file:///etc/passwd":                                 "http or https",
		"https:///nohost":                                    "no host",
		"https://user:pw@example.com/":                       "credentials",
		"https://example.com/#frag":                          "fragment",
		"http://127.0.0.1:9/":                                "loopback",
		"http://[::1]/":                                      "loopback",
		"http://169.254.169.254/latest/":                     "link-local",
		"http://[::ffff:10.0.0.1]/":                          "private",
		"http://[::127.0.0.1]/":                              "special-purpose",
		"http://[fec0::1]/":                                  "special-purpose",
		"http://[::ffff:8.8.8.8]/":                           "special-purpose",
		"http://192.88.99.7/":                                "special-purpose",
		"https://example.com:0/":                             "port 0",
		"https://e.com/" + strings.Repeat("a", MaxURLLength): "longer",
		"gopher://x":                                         "http or https",
	} {
		if _, err := p.CheckURL(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", bad, err, want)
		}
	}
}

// The test vector the Standard Webhooks reference libraries share: a
// receiver using any of them accepts what Sign makes.
func TestSignMatchesTheStandardWebhooksVector(t *testing.T) {
	const secret, id, body = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", `{"test": 2432232314}`
	ts := time.Unix(1614265330, 0)
	sig, err := Sign(secret, id, ts, []byte(body))
	if err != nil || sig != "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=" {
		t.Fatalf("Sign = %q, %v", sig, err)
	}
	if err := Verify(secret, id, "1614265330", "v1,bm9wZQ== "+sig, []byte(body), ts.Add(time.Minute)); err != nil {
		t.Errorf("Verify: %v", err)
	}
	for name, check := range map[string]error{
		"tampered body": Verify(secret, id, "1614265330", sig, []byte(body+" "), ts),
		"other id":      Verify(secret, "msg_other", "1614265330", sig, []byte(body), ts),
		"replayed late": Verify(secret, id, "1614265330", sig, []byte(body), ts.Add(Tolerance+time.Second)),
		"other secret":  Verify(DeriveSecret([]byte("k"), "key_1"), id, "1614265330", sig, []byte(body), ts),
	} {
		if check == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

func TestDerivedSecretsDifferPerKeyAndSurviveRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "webhook.key")
	m1, err := LoadOrCreateMaster(path)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := LoadOrCreateMaster(path)
	if err != nil || string(m1) != string(m2) {
		t.Fatalf("second load: %v, same=%v", err, string(m1) == string(m2))
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("master secret mode %v, want 0600", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(filepath.Dir(path)); fi.Mode().Perm() != 0o700 {
		t.Errorf("master secret's directory mode %v, want 0700", fi.Mode().Perm())
	}
	// A key file left readable by others is narrowed on the next start.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateMaster(path); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("a 0644 master secret was left %v, want 0600", fi.Mode().Perm())
	}
	a, b := DeriveSecret(m1, "key_a"), DeriveSecret(m1, "key_b")
	if a == b || !strings.HasPrefix(a, SecretPrefix) || a != DeriveSecret(m2, "key_a") {
		t.Errorf("secrets %q %q", a, b)
	}
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateMaster(path); err == nil {
		t.Error("a 5-byte master secret was accepted")
	}
}

// receiver is a webhook endpoint on a loopback address that records what
// it gets and answers with the statuses it is given, then 204.
type receiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	got      []*http.Request
	bodies   [][]byte
	statuses []int
}

func newReceiver(t *testing.T, addr string, statuses ...int) *receiver {
	r := &receiver{statuses: statuses}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: r}}
	r.srv.Start()
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got, r.bodies = append(r.got, req), append(r.bodies, b)
	status := http.StatusNoContent
	if len(r.statuses) > 0 {
		status, r.statuses = r.statuses[0], r.statuses[1:]
	}
	if status/100 == 3 {
		w.Header().Set("Location", "http://"+req.Host+"/elsewhere")
	}
	w.WriteHeader(status)
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func message(url string) Message {
	return Message{URL: url, ID: "msg_1", Secret: DeriveSecret([]byte("0123456789abcdef0123456789abcdef"), "key_1"), Body: []byte(`{"type":"job.succeeded"}`)}
}

func TestSendSignsAndDelivers(t *testing.T) {
	rcv := newReceiver(t, "127.0.0.1:0")
	s := NewSender(Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, nil, 5*time.Second)
	m := message(rcv.srv.URL + "/hook")
	now := time.Now()
	if r := s.Send(context.Background(), m, now); !r.Delivered() || r.Status != 204 {
		t.Fatalf("Send = %+v", r)
	}
	req := rcv.got[0]
	if err := Verify(m.Secret, req.Header.Get("webhook-id"), req.Header.Get("webhook-timestamp"), req.Header.Get("webhook-signature"), rcv.bodies[0], now); err != nil {
		t.Errorf("the receiver cannot verify what it got: %v", err)
	}
	if req.Header.Get("webhook-id") != "msg_1" || req.Header.Get("Content-Type") != "application/json" || req.URL.Path != "/hook" {
		t.Errorf("request: %s %v", req.URL, req.Header)
	}
}

func TestSendRefusesLoopbackByDefault(t *testing.T) {
	canary := testenv.Canary(t, "127.0.0.1:0")
	s := NewSender(Policy{}, nil, 2*time.Second)
	for _, u := range []string{"http://" + canary.Addr() + "/", "http://localhost:" + testenv.Port(canary.Addr()) + "/"} {
		r := s.Send(context.Background(), message(u), time.Now())
		if r.Delivered() || !r.Permanent() || !strings.Contains(r.Err.Error(), "address not allowed") {
			t.Errorf("%s: %+v, want a permanent refusal: address not allowed", u, r)
		}
	}
	if n := canary.Hits(); n != 0 {
		t.Errorf("the canary saw %d connections", n)
	}
}

// A name that resolves to an allowed address and then to a refused one
// never reaches the refused one: each connection goes to the address its
// own lookup returned and the policy checked.
func TestSendIsSafeAgainstDNSRebinding(t *testing.T) {
	rcv := newReceiver(t, "127.0.0.2:0")
	canary := testenv.Canary(t, "127.0.0.1:"+testenv.Port(rcv.srv.Listener.Addr().String()))
	res := &testenv.Rebinder{First: netip.MustParseAddr("127.0.0.2"), Rest: netip.MustParseAddr("127.0.0.1")}
	s := NewSender(Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}}, res, 2*time.Second)
	u := "http://hooks.rebind.test:" + testenv.Port(canary.Addr()) + "/h"
	if r := s.Send(context.Background(), message(u), time.Now()); !r.Delivered() {
		t.Fatalf("first attempt (resolves to the allowed 127.0.0.2): %+v", r)
	}
	// New connections now resolve to 127.0.0.1.
	s.client.CloseIdleConnections()
	for i := 0; i < 3; i++ {
		if r := s.Send(context.Background(), message(u), time.Now()); r.Delivered() || !r.Permanent() {
			t.Errorf("attempt after rebinding: %+v, want refused", r)
		}
	}
	if rcv.count() != 1 || canary.Hits() != 0 {
		t.Errorf("receiver got %d, canary %d connections; want 1 and 0", rcv.count(), canary.Hits())
	}
}

func TestSendDoesNotFollowRedirects(t *testing.T) {
	rcv := newReceiver(t, "127.0.0.1:0", http.StatusTemporaryRedirect)
	s := NewSender(Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, nil, 2*time.Second)
	r := s.Send(context.Background(), message(rcv.srv.URL+"/"), time.Now())
	if r.Delivered() || r.Status != http.StatusTemporaryRedirect || r.Permanent() {
		t.Errorf("redirect: %+v, want a retryable failure", r)
	}
	if rcv.count() != 1 {
		t.Errorf("the receiver was asked %d times; the redirect was followed", rcv.count())
	}
}

func TestSendResults(t *testing.T) {
	rcv := newReceiver(t, "127.0.0.1:0", 500, 410)
	s := NewSender(Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, nil, 2*time.Second)
	if r := s.Send(context.Background(), message(rcv.srv.URL), time.Now()); r.Delivered() || r.Permanent() || r.Status != 500 {
		t.Errorf("500: %+v, want retryable", r)
	}
	if r := s.Send(context.Background(), message(rcv.srv.URL), time.Now()); r.Delivered() || !r.Permanent() {
		t.Errorf("410: %+v, want permanent", r)
	}
	// Nothing listens: a connection error, worth retrying.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String() + "/"
	ln.Close()
	if r := s.Send(context.Background(), message(dead), time.Now()); r.Delivered() || r.Permanent() || r.Status != 0 {
		t.Errorf("closed port: %+v, want retryable", r)
	}
}

// resolverFunc is a Resolver made of a function.
type resolverFunc func(host string) ([]netip.Addr, error)

func (f resolverFunc) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return f(host)
}

// A failed delivery's error is shown to the client (webhook.last_error):
// it must not tell a tenant what the API host's resolver answered, where
// that resolver is, or which address a name led to.
func TestSendErrorsNameNoResolvedAddress(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := testenv.Port(ln.Addr().String())
	ln.Close()
	res := resolverFunc(func(host string) ([]netip.Addr, error) {
		switch host {
		case "internal.corp.test":
			return []netip.Addr{netip.MustParseAddr("10.20.30.40"), netip.MustParseAddr("fec0::7")}, nil
		case "closed.test":
			return []netip.Addr{netip.MustParseAddr("::ffff:127.0.0.1")}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, Server: "10.99.0.53:53", IsNotFound: true}
	})
	s := NewSender(Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, res, 2*time.Second)
	for _, tc := range []struct {
		url, want string
		permanent bool
	}{
		{"http://internal.corp.test/h", "address not allowed", true},
		{"http://missing.corp.test/h", "name did not resolve", false},
		{"http://closed.test:" + closed + "/h", "connection refused", false},
	} {
		r := s.Send(context.Background(), message(tc.url), time.Now())
		if r.Delivered() || r.Permanent() != tc.permanent || !strings.Contains(r.Err.Error(), tc.want) {
			t.Errorf("%s: %+v, want %q (permanent %v)", tc.url, r, tc.want, tc.permanent)
			continue
		}
		for _, leak := range []string{"10.20.30.40", "fec0", "10.99.0.53", ":53", "lookup", "127.0.0.1", "private", "loopback", "site-local"} {
			if strings.Contains(r.Err.Error(), leak) {
				t.Errorf("%s: the error %q names %q", tc.url, r.Err, leak)
			}
		}
	}
	// The real resolver's answer for localhost is not repeated either.
	r := NewSender(Policy{}, nil, 2*time.Second).Send(context.Background(), message("http://localhost:"+closed+"/"), time.Now())
	if msg := r.Err.Error(); strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, "::1") || strings.Contains(msg, "loopback") {
		t.Errorf("localhost: the error %q names what localhost resolved to", msg)
	}
}

func TestScheduleBacksOffWithJitter(t *testing.T) {
	sc, err := ParseSchedule("1s, 10s,1m")
	if err != nil || len(sc) != 3 {
		t.Fatalf("ParseSchedule: %v %v", sc, err)
	}
	for i, base := range sc {
		d, ok := sc.Next(i + 1)
		if !ok || d < base*9/10 || d > base*11/10 {
			t.Errorf("after attempt %d: %v %v, want %v ±10%%", i+1, d, ok, base)
		}
	}
	if _, ok := sc.Next(4); ok {
		t.Error("a 4th retry after a 3-step schedule")
	}
	if _, err := ParseSchedule("5s,-1s"); err == nil {
		t.Error("a negative delay was accepted")
	}
}
