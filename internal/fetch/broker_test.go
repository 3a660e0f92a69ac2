package fetch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/egress"
	"github.com/renderbox/renderbox/internal/wire"
)

// A page's secrets go to the hosts their scope names and not to another
// host the same page loads from; the answer carries only the headers a
// page may see.
func TestBrokerScopesHeaders(t *testing.T) {
	seen := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Host + " cookie=" + r.Header.Get("Cookie") + " ua=" + r.Header.Get("User-Agent")
		w.Header().Set("Content-Type", "text/css")
		w.Header().Set("Set-Cookie", "x=1")
		_, _ = w.Write([]byte("p{}"))
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	f := New(&egress.Dialer{Policy: egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}}, Limits{}, nil)
	b := Broker{Ctx: context.Background(), Session: f.Session(), UserAgent: "ua/1",
		Header: http.Header{"Cookie": {"s=SECRET"}}, Scope: "localhost"}
	a, body := b.Fetch(wire.FetchRequest{ID: 1, Method: "GET", URL: "http://localhost" + port + "/a.css"})
	if a.Status != 200 || string(body) != "p{}" || len(a.Headers) != 1 || a.Headers[0] != [2]string{"Content-Type", "text/css"} {
		t.Errorf("answer %+v %q", a, body)
	}
	if got := <-seen; !strings.HasSuffix(got, "cookie=s=SECRET ua=ua/1") {
		t.Errorf("the scoped host saw %q", got)
	}
	b.Fetch(wire.FetchRequest{ID: 2, Method: "GET", URL: "http://127.0.0.1" + port + "/b.css"})
	if got := <-seen; !strings.HasSuffix(got, "cookie= ua=ua/1") {
		t.Errorf("another host saw %q", got)
	}
	if a, _ := b.Fetch(wire.FetchRequest{ID: 3, Method: "POST", URL: "http://localhost" + port + "/"}); a.Refused != ReasonMethod {
		t.Errorf("a POST: %+v", a)
	}
	if recs := b.Session.Records(); len(recs) != 3 || recs[2].Refused != ReasonMethod {
		t.Errorf("records %+v", recs)
	}
}
