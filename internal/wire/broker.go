package wire

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
)

// The broker's frames: a page that renders a URL (Browser.URL) has the
// host fetch for it, the sandbox having no network. The agent sends a
// TypeFetch frame for each request the page makes, in the middle of its
// response; the host answers each one on the agent's stdin, which stays
// open for that, with a TypeAnswer frame and the body's bytes in TypeBody
// frames, one answer at a time (docs/security.md, "Fetching on the host").
const (
	TypeFetch  byte = 'G' // agent → host: JSON FetchRequest
	TypeAnswer byte = 'A' // host → agent: JSON FetchAnswer; Size bytes of TypeBody follow
	TypeBody   byte = 'B' // host → agent: a chunk of the current answer's body
)

// Bounds on the broker's frames, both ways: the request and the answer's
// head are small JSON; a body is at most MaxFetchBody bytes, whatever the
// host's fetcher allows, since the agent holds it whole to hand it to
// Chromium; and at most MaxFetchesPending requests wait for an answer.
const (
	MaxFetchFrame     = 16 << 10
	MaxFetchBody      = 32 << 20
	MaxFetchesPending = 64
	MaxFetchURL       = 8 << 10
)

// FetchRequest is one request of the page for the host to make.
type FetchRequest struct {
	// ID is the agent's, unique within the job; the answer carries it.
	ID     uint32 `json:"id"`
	Method string `json:"method"`
	URL    string `json:"url"`
}

// FetchAnswer is the host's answer to a FetchRequest: a response (Status,
// Headers, Size bytes of body after it) or a refusal (Refused, the
// reason, and Error, what happened), or an origin that did not answer
// (Error alone).
type FetchAnswer struct {
	ID      uint32      `json:"id"`
	Status  int         `json:"status,omitempty"`
	Headers [][2]string `json:"headers,omitempty"`
	Size    int64       `json:"size"`
	Refused string      `json:"refused,omitempty"`
	Error   string      `json:"error,omitempty"`
}

// A Broker fetches what a page asks for. Fetch returns the answer and its
// body (len(body) == answer.Size); it is called concurrently.
type Broker interface {
	Fetch(req FetchRequest) (FetchAnswer, []byte)
}

// CheckFetch checks a request as the host receives it.
func CheckFetch(p []byte) (FetchRequest, error) {
	var fr FetchRequest
	if len(p) > MaxFetchFrame {
		return fr, protoErr("fetch request of %d bytes", len(p))
	}
	if err := json.Unmarshal(p, &fr); err != nil {
		return fr, protoErr("fetch request: %v", err)
	}
	if len(fr.URL) > MaxFetchURL || len(fr.Method) > 16 {
		return fr, protoErr("fetch request's URL or method too long")
	}
	return fr, nil
}

// WriteAnswer writes one answer and its body to w.
func WriteAnswer(w io.Writer, a FetchAnswer, body []byte) error {
	a.Size = int64(len(body))
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	if len(b) > MaxFetchFrame {
		// Headers past the bound are dropped rather than the answer.
		a.Headers = nil
		if b, err = json.Marshal(a); err != nil {
			return err
		}
	}
	if err := WriteFrame(w, TypeAnswer, b); err != nil {
		return err
	}
	for len(body) > 0 {
		n := min(len(body), MaxFrame)
		if err := WriteFrame(w, TypeBody, body[:n]); err != nil {
			return err
		}
		body = body[n:]
	}
	return nil
}

// ReadAnswer reads one answer and its body, at most MaxFetchBody bytes.
func ReadAnswer(fr *Reader) (FetchAnswer, []byte, error) {
	var a FetchAnswer
	typ, p, err := fr.Next()
	if err != nil {
		return a, nil, err
	}
	if typ != TypeAnswer || len(p) > MaxFetchFrame {
		return a, nil, protoErr("frame %q where a fetch answer belongs", typ)
	}
	if err := json.Unmarshal(p, &a); err != nil {
		return a, nil, protoErr("fetch answer: %v", err)
	}
	if a.Size < 0 || a.Size > MaxFetchBody {
		return a, nil, protoErr("fetch answer of %d bytes", a.Size)
	}
	body := make([]byte, 0, a.Size)
	for int64(len(body)) < a.Size {
		typ, p, err := fr.Next()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return a, nil, err
		}
		if typ != TypeBody || int64(len(body)+len(p)) > a.Size {
			return a, nil, protoErr("fetch answer's body does not match its size")
		}
		body = append(body, p...)
	}
	return a, body, nil
}

// serveFetches answers the agent's requests with b, each in its own
// goroutine, writing the answers to w one at a time. It is what
// ReadResponseTo does with the TypeFetch frames of a response.
type fetchServer struct {
	b       Broker
	w       io.Writer
	wmu     sync.Mutex
	mu      sync.Mutex
	pending int
	wg      sync.WaitGroup
	werr    error
}

func (s *fetchServer) serve(p []byte) error {
	req, err := CheckFetch(p)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.pending >= MaxFetchesPending {
		s.mu.Unlock()
		return protoErr("more than %d fetches pending", MaxFetchesPending)
	}
	s.pending++
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		a, body := s.b.Fetch(req)
		a.ID = req.ID
		if int64(len(body)) > MaxFetchBody {
			a, body = FetchAnswer{ID: req.ID, Refused: "too_large", Error: fmt.Sprintf("over the %d bytes a page's response may be", MaxFetchBody)}, nil
		}
		s.wmu.Lock()
		if s.werr == nil {
			s.werr = WriteAnswer(s.w, a, body)
		}
		s.wmu.Unlock()
		s.mu.Lock()
		s.pending--
		s.mu.Unlock()
	}()
	return nil
}

// FetchableURL reports whether a page's request may be put to the host
// at all: a URL no longer than MaxFetchURL. The host's policy decides the
// rest (scheme, host, address), and records its refusals.
func FetchableURL(raw string) bool {
	if len(raw) > MaxFetchURL || strings.ContainsAny(raw, "\r\n") {
		return false
	}
	_, err := url.Parse(raw)
	return err == nil
}

// brokeredHeaders are the response headers a broker's answer carries to
// the page: those that matter to its rendering, and never a cookie.
var brokeredHeaders = map[string]bool{
	"content-type": true, "content-language": true, "content-security-policy": true,
	"access-control-allow-origin": true, "access-control-allow-credentials": true,
	"access-control-allow-headers": true, "access-control-allow-methods": true,
	"access-control-expose-headers": true, "timing-allow-origin": true,
	"cross-origin-resource-policy": true, "x-content-type-options": true,
}

// BrokeredHeader reports whether a response header of this name goes to
// the page; the host sends only those, and the agent passes only those on.
func BrokeredHeader(name string) bool { return brokeredHeaders[strings.ToLower(name)] }
