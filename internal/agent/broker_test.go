package agent

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/agent/cdp/cdptest"
	"github.com/renderbox/renderbox/internal/wire"
)

// A URL page's requests go to the host as fetch frames and come back as
// its answers: a response fulfils the request with the host's status,
// headers and body; a refusal fails it and is recorded with its reason;
// an origin's 404 is fulfilled and recorded as missing; a POST never
// reaches the host.
func TestBrokeredRequestsAskTheHost(t *testing.T) {
	c, b := cdptest.New(t)
	// The agent's stdout (fetches) and stdin (answers), as pipes.
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { outR.Close(); outW.Close(); inR.Close(); inW.Close() })
	const page = "http://origin.test/index.html"
	bc := newBrokerClient(inR, bufio.NewWriter(outW))
	ic := newInterceptor(c, pagePolicy{broker: bc, url: page}, func(string) {})
	ic.install()

	// The host: answers each fetch as the table says.
	answers := map[string]struct {
		a    wire.FetchAnswer
		body string
	}{
		"http://origin.test/a.css":  {wire.FetchAnswer{Status: 200, Headers: [][2]string{{"Content-Type", "text/css"}, {"Set-Cookie", "x=1"}}}, "p{color:red}"},
		"http://169.254.169.254/":   {wire.FetchAnswer{Refused: "address", Error: "169.254.169.254 is link-local"}, ""},
		"http://origin.test/no.png": {wire.FetchAnswer{Status: 404}, ""},
	}
	asked := make(chan wire.FetchRequest, 8)
	go func() {
		fr := wire.NewReader(outR)
		for {
			typ, p, err := fr.Next()
			if err != nil {
				return
			}
			if typ != wire.TypeFetch {
				t.Errorf("frame %q from the agent", typ)
				return
			}
			req, err := wire.CheckFetch(p)
			if err != nil {
				t.Error(err)
				return
			}
			asked <- req
			ans := answers[req.URL]
			ans.a.ID = req.ID
			if err := wire.WriteAnswer(inW, ans.a, []byte(ans.body)); err != nil {
				t.Error(err)
				return
			}
		}
	}()

	type answered struct {
		RequestID       string              `json:"requestId"`
		ResponseCode    int                 `json:"responseCode"`
		Body            string              `json:"body"`
		ResponseHeaders []map[string]string `json:"responseHeaders"`
		ErrorReason     string              `json:"errorReason"`
	}
	expect := func(method string) answered {
		t.Helper()
		m := b.Expect("S1", method)
		var a answered
		if err := json.Unmarshal(m.Params, &a); err != nil {
			t.Fatal(err)
		}
		return a
	}

	paused(b, "S1", "R1", "GET", "http://origin.test/a.css")
	a := expect("Fetch.fulfillRequest")
	body, _ := base64.StdEncoding.DecodeString(a.Body)
	if a.RequestID != "R1" || a.ResponseCode != 200 || string(body) != "p{color:red}" {
		t.Errorf("a.css: answered %+v (body %q)", a, body)
	}
	var names []string
	for _, h := range a.ResponseHeaders {
		names = append(names, h["name"]+": "+h["value"])
	}
	if got := strings.Join(names, ", "); got != "Cache-Control: no-store, Content-Type: text/css" {
		t.Errorf("a.css: headers %s; want the host's Content-Type and no cookie", got)
	}

	paused(b, "S1", "R2", "GET", "http://169.254.169.254/")
	if a := expect("Fetch.failRequest"); a.RequestID != "R2" || a.ErrorReason != "AccessDenied" {
		t.Errorf("metadata address: answered %+v", a)
	}

	paused(b, "S1", "R3", "GET", "http://origin.test/no.png")
	if a := expect("Fetch.fulfillRequest"); a.RequestID != "R3" || a.ResponseCode != 404 {
		t.Errorf("no.png: answered %+v", a)
	}

	paused(b, "S1", "R4", "POST", "http://origin.test/form")
	if a := expect("Fetch.failRequest"); a.RequestID != "R4" {
		t.Errorf("POST: answered %+v", a)
	}
	if len(asked) != 3 {
		t.Errorf("the host was asked %d times, want 3 (no POST)", len(asked))
	}

	blocked, missing, _ := ic.report()
	if want := []string{"http://169.254.169.254/ (refused: address)", "http://origin.test/form (refused: method POST)"}; strings.Join(blocked, "|") != strings.Join(want, "|") {
		t.Errorf("blocked %q, want %q", blocked, want)
	}
	if want := "http://origin.test/no.png (404)"; len(missing) != 1 || missing[0] != want {
		t.Errorf("missing %q, want [%q]", missing, want)
	}
	if err := ic.pageErr(); err != nil {
		t.Errorf("the page itself was not asked for, yet: %v", err)
	}

	// Once closed, nothing more is written: the outputs follow.
	bc.close()
	if _, _, err := bc.fetch("GET", page); err == nil {
		t.Error("a fetch after close went out")
	}
}
