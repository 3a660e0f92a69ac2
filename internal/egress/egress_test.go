package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/renderbox/renderbox/internal/testenv"
)

func mustCIDRs(t *testing.T, s string) []netip.Prefix {
	t.Helper()
	ps, err := ParseCIDRs(s)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestCheckRefusesNonPublicUnlessAllowed(t *testing.T) {
	var p Policy
	for _, a := range []string{"127.0.0.1", "::1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254",
		"fd00:ec2::254", "fe80::1", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "0.0.0.0", "100.64.0.1"} {
		if err := p.Check(netip.MustParseAddr(a)); !errors.Is(err, ErrRefused) || ReasonOf(err) != ReasonAddress {
			t.Errorf("%s: %v, want refused for its address", a, err)
		}
	}
	for _, a := range []string{"8.8.8.8", "2606:4700:4700::1111"} {
		if err := p.Check(netip.MustParseAddr(a)); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	p = Policy{Allow: mustCIDRs(t, "10.0.0.0/8, 127.0.0.0/8"), Deny: mustCIDRs(t, "10.9.0.0/16, 8.8.8.8")}
	for a, ok := range map[string]bool{"10.1.1.1": true, "127.0.0.1": true, "::ffff:127.0.0.1": true,
		"10.9.1.1": false, "8.8.8.8": false, "8.8.4.4": true, "192.168.0.1": false, "169.254.169.254": false} {
		if err := p.Check(netip.MustParseAddr(a)); (err == nil) != ok {
			t.Errorf("%s: %v, want allowed=%v", a, err, ok)
		}
	}
}

func TestHostPatterns(t *testing.T) {
	hs, err := ParseHosts(" *.Example.com, files.test. ,192.0.2.1")
	if err != nil || len(hs) != 3 {
		t.Fatalf("ParseHosts: %v %v", hs, err)
	}
	for host, want := range map[string]bool{"a.example.com": true, "A.B.EXAMPLE.COM.": true, "example.com": false,
		"badexample.com": false, "files.test": true, "x.files.test": false, "192.0.2.1": true} {
		got := false
		for _, h := range hs {
			got = got || MatchHost(h, host)
		}
		if got != want {
			t.Errorf("%s: matched=%v, want %v", host, got, want)
		}
	}
	for _, bad := range []string{"*", "*.", "a/b", "user@host", "*.*.x"} {
		if _, err := ParseHosts(bad); err == nil {
			t.Errorf("ParseHosts(%q) succeeded", bad)
		}
	}
	p := Policy{AllowHosts: []string{"*.example.com"}, DenyHosts: []string{"secret.example.com"}}
	for host, ok := range map[string]bool{"cdn.example.com": true, "secret.example.com": false, "other.test": false} {
		if err := p.CheckHost(host); (err == nil) != ok || (err != nil && ReasonOf(err) != ReasonHost) {
			t.Errorf("%s: %v, want allowed=%v", host, err, ok)
		}
	}
}

func TestCheckURL(t *testing.T) {
	var p Policy
	for raw, reason := range map[string]string{
		"file:///etc/passwd":                  ReasonScheme,
		"gopher://x/":                         ReasonScheme,
		"ftp://example.com/a":                 ReasonScheme,
		"http:///nohost":                      ReasonHost,
		"http://127.0.0.1/":                   ReasonAddress,
		"http://169.254.169.254/latest/meta/": ReasonAddress,
		"http://[::ffff:10.0.0.1]/":           ReasonAddress,
		"https://example.com:0/":              ReasonAddress,
		"https://example.com/":                "",
		"http://8.8.8.8:8080/x":               "",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.CheckURL(u); ReasonOf(err) != reason {
			t.Errorf("%s: %v, want reason %q", raw, err, reason)
		}
	}
}

// resolverFunc is a Resolver made of a function.
type resolverFunc func(host string) ([]netip.Addr, error)

func (f resolverFunc) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return f(host)
}

func serve(t *testing.T, addr string, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: h}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, c *http.Client, u string) (string, error) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestClientReachesAnExplicitlyAllowedAddressOnly(t *testing.T) {
	srv := serve(t, "127.0.0.1:0", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") })
	allowed := NewClient(&Dialer{Policy: Policy{Allow: mustCIDRs(t, "127.0.0.1")}}, TransportOptions{})
	if body, err := get(t, allowed, srv.URL+"/x"); err != nil || body != "hello" {
		t.Fatalf("allowed loopback: %q %v", body, err)
	}
	def := NewClient(&Dialer{}, TransportOptions{})
	canary := testenv.Canary(t, "127.0.0.1:0")
	for _, u := range []string{"http://" + canary.Addr() + "/", "http://localhost:" + testenv.Port(canary.Addr()) + "/"} {
		if _, err := get(t, def, u); !errors.Is(err, ErrRefused) || ReasonOf(err) != ReasonAddress {
			t.Errorf("%s: %v, want refused for its address", u, err)
		}
	}
	if n := canary.Hits(); n != 0 {
		t.Errorf("the canary saw %d connections", n)
	}
}

// A public-looking name whose answer is private is refused when it is
// dialed, and the error does not say what it resolved to.
func TestPublicNameResolvingToPrivateIsRefused(t *testing.T) {
	canary := testenv.Canary(t, "127.0.0.1:0")
	res := resolverFunc(func(string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("::ffff:127.0.0.1"), netip.MustParseAddr("169.254.169.254")}, nil
	})
	c := NewClient(&Dialer{Resolver: res}, TransportOptions{})
	_, err := get(t, c, "http://www.public-looking.test:"+testenv.Port(canary.Addr())+"/")
	if !errors.Is(err, ErrRefused) || ReasonOf(err) != ReasonAddress {
		t.Fatalf("got %v, want refused for its address", err)
	}
	for _, leak := range []string{"127.0.0.1", "169.254", "loopback"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("the error %q names %q", err, leak)
		}
	}
	if canary.Hits() != 0 {
		t.Errorf("the canary saw %d connections", canary.Hits())
	}
}

func TestRebindingNameReachesOnlyTheCheckedAddress(t *testing.T) {
	srv := serve(t, "127.0.0.2:0", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	canary := testenv.Canary(t, "127.0.0.1:"+testenv.Port(srv.Listener.Addr().String()))
	res := &testenv.Rebinder{First: netip.MustParseAddr("127.0.0.2"), Rest: netip.MustParseAddr("127.0.0.1")}
	d := &Dialer{Policy: Policy{Allow: mustCIDRs(t, "127.0.0.2")}, Resolver: res}
	c := NewClient(d, TransportOptions{})
	u := "http://rebind.test:" + testenv.Port(canary.Addr()) + "/"
	if body, err := get(t, c, u); err != nil || body != "ok" {
		t.Fatalf("first fetch: %q %v", body, err)
	}
	c.CloseIdleConnections()
	if _, err := get(t, c, u); !errors.Is(err, ErrRefused) {
		t.Errorf("after rebinding: %v, want refused", err)
	}
	if canary.Hits() != 0 {
		t.Errorf("the canary saw %d connections", canary.Hits())
	}
}

// Every redirect is a new URL: one from an allowed host to a refused
// address, or a scheme other than http(s), is refused, and so is the
// eleventh.
func TestRedirectsAreCheckedAndBounded(t *testing.T) {
	canary := testenv.Canary(t, "127.0.0.1:0")
	var hops atomic.Int32
	srv := serve(t, "127.0.0.2:0", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-private":
			http.Redirect(w, r, "http://"+canary.Addr()+"/", http.StatusFound)
		case "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/to-file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/loop":
			hops.Add(1)
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			if n := hops.Add(1); n <= MaxRedirects {
				http.Redirect(w, r, "/ten", http.StatusFound)
				return
			}
			_, _ = io.WriteString(w, "landed")
		}
	})
	c := NewClient(&Dialer{Policy: Policy{Allow: mustCIDRs(t, "127.0.0.2")}}, TransportOptions{})
	for path, reason := range map[string]string{"/to-private": ReasonAddress, "/to-metadata": ReasonAddress, "/to-file": ReasonScheme} {
		if _, err := get(t, c, srv.URL+path); ReasonOf(err) != reason {
			t.Errorf("%s: %v, want refused (%s)", path, err, reason)
		}
	}
	if canary.Hits() != 0 {
		t.Errorf("the canary saw %d connections", canary.Hits())
	}
	hops.Store(0)
	if body, err := get(t, c, srv.URL+"/ten"); err != nil || body != "landed" {
		t.Errorf("ten redirects: %q %v, want followed", body, err)
	}
	hops.Store(0)
	if _, err := get(t, c, srv.URL+"/loop"); ReasonOf(err) != ReasonRedirects || hops.Load() != MaxRedirects+1 {
		t.Errorf("a redirect loop: %v after %d requests, want refused after %d", err, hops.Load(), MaxRedirects+1)
	}
}

// A redirect to another host carries none of the client's headers; one on
// the same host keeps them.
func TestRedirectToAnotherHostDropsHeaders(t *testing.T) {
	got := make(chan http.Header, 4)
	other := serve(t, "127.0.0.2:0", func(_ http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() })
	first := serve(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/same" {
			http.Redirect(w, r, "/landed", http.StatusFound)
			return
		}
		if r.URL.Path == "/landed" {
			got <- r.Header.Clone()
			return
		}
		http.Redirect(w, r, other.URL+"/x", http.StatusFound)
	})
	c := NewClient(&Dialer{Policy: Policy{Allow: mustCIDRs(t, "127.0.0.0/8")}}, TransportOptions{})
	for path, keep := range map[string]bool{"/same": true, "/away": false} {
		req, _ := http.NewRequest(http.MethodGet, first.URL+path, nil)
		req.Header.Set("X-Api-Key", "k")
		req.Header.Set("Authorization", "Bearer t")
		req.Header.Set("User-Agent", "ua")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h := <-got
		if (h.Get("X-Api-Key") == "k") != keep || (h.Get("Authorization") != "") != keep || h.Get("User-Agent") != "ua" {
			t.Errorf("%s: the redirect's target got %v; want the headers kept=%v, the User-Agent always", path, h, keep)
		}
	}
}
