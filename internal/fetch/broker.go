package fetch

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"sort"

	"github.com/renderbox/renderbox/internal/egress"
	"github.com/renderbox/renderbox/internal/wire"
)

// Broker answers a URL page's requests (wire.Broker) with a job's
// Session, inside the job's context: each one fetched under the egress
// policy and the job's budget, or refused with the reason, and each in
// the session's records.
type Broker struct {
	Ctx     context.Context
	Session *Session
	// UserAgent, when set, is sent with every request (the page's
	// user_agent); else the fetcher's own.
	UserAgent string
	// Header (cookies, credentials, the page's extra headers: secrets)
	// is sent only to hosts Scope matches (egress.MatchHost), never to a
	// third party the page loads from; a redirect to another host drops
	// it (egress).
	Header http.Header
	Scope  string
}

// Fetch makes the page's request and answers it.
func (b Broker) Fetch(req wire.FetchRequest) (wire.FetchAnswer, []byte) {
	if req.Method != "GET" {
		// The agent asks for nothing else; a request that says otherwise
		// is refused, and recorded like the policy's refusals.
		b.Session.refuse(Record{URL: Redact(req.URL), Refused: ReasonMethod, Error: "only GET is fetched for a page"})
		return wire.FetchAnswer{Refused: ReasonMethod, Error: "only GET is fetched for a page"}, nil
	}
	var body bytes.Buffer
	fr := Request{URL: req.URL, Max: wire.MaxFetchBody}
	fr.Header = http.Header{}
	if b.UserAgent != "" {
		fr.Header.Set("User-Agent", b.UserAgent)
	}
	if u, err := url.Parse(req.URL); err == nil && len(b.Header) > 0 && b.Scope != "" && egress.MatchHost(b.Scope, u.Hostname()) {
		for k, vs := range b.Header {
			fr.Header[k] = vs
		}
	}
	resp, err := b.Session.Fetch(b.Ctx, fr, &body)
	var a wire.FetchAnswer
	if resp != nil {
		a.Status = resp.Status
		for k, vs := range resp.Header {
			if wire.BrokeredHeader(k) {
				for _, v := range vs {
					a.Headers = append(a.Headers, [2]string{k, v})
				}
			}
		}
		sort.Slice(a.Headers, func(i, j int) bool { return a.Headers[i][0] < a.Headers[j][0] })
	}
	switch {
	case ReasonOf(err) != "":
		return wire.FetchAnswer{Refused: ReasonOf(err), Error: err.Error()}, nil
	case err != nil && resp == nil:
		return wire.FetchAnswer{Error: err.Error()}, nil
	case err != nil && a.Status >= 200 && a.Status <= 299:
		// The body failed as it arrived (the job's end, the origin's):
		// the request fails rather than pass on part of it.
		return wire.FetchAnswer{Error: err.Error()}, nil
	case err != nil:
		return a, nil // a status outside 2xx: its body is not read
	}
	return a, body.Bytes()
}
