package wire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

type tableBroker map[string]string

func (b tableBroker) Fetch(req FetchRequest) (FetchAnswer, []byte) {
	body, ok := b[req.URL]
	if !ok {
		return FetchAnswer{Refused: "host", Error: "not allowed"}, nil
	}
	return FetchAnswer{Status: 200, Headers: [][2]string{{"Content-Type", "text/css"}}}, []byte(body)
}

// A response may carry fetches: the host answers each on the agent's
// stream, and a body over a frame is split into frames.
func TestResponseFetchesAreAnswered(t *testing.T) {
	big := strings.Repeat("x", MaxFrame+10)
	var resp bytes.Buffer
	WriteJSON(&resp, TypeFetch, FetchRequest{ID: 7, Method: "GET", URL: "http://a.test/big"})
	WriteJSON(&resp, TypeFetch, FetchRequest{ID: 8, Method: "GET", URL: "http://b.test/"})
	WriteJSON(&resp, TypeResult, Result{})
	pr, pw := io.Pipe()
	got := make(chan map[uint32]string, 1)
	go func() {
		fr := NewReader(pr)
		m := map[uint32]string{}
		for len(m) < 2 {
			a, body, err := ReadAnswer(fr)
			if err != nil {
				t.Error(err)
				break
			}
			m[a.ID] = a.Refused + string(body)
		}
		got <- m
	}()
	if _, err := ReadResponseTo(&resp, Limits{MaxBytes: 1, MaxFiles: 1, Broker: tableBroker{"http://a.test/big": big}, Answers: pw}, nil); err != nil {
		t.Fatal(err)
	}
	m := <-got
	if m[7] != big || m[8] != "host" {
		t.Errorf("answers: %d bytes for 7, %q for 8", len(m[7]), m[8])
	}
}

// Without a broker a fetch is a protocol violation, as is a request over
// its bound; an answer whose body overruns its size is one too.
func TestFetchFramesAreBounded(t *testing.T) {
	var resp bytes.Buffer
	WriteJSON(&resp, TypeFetch, FetchRequest{ID: 1, Method: "GET", URL: "http://a.test/"})
	if _, err := ReadResponse(&resp, Limits{MaxBytes: 1, MaxFiles: 1}); !errors.Is(err, ErrProtocol) {
		t.Errorf("a fetch without a broker: %v", err)
	}
	resp.Reset()
	WriteJSON(&resp, TypeFetch, FetchRequest{ID: 1, Method: "GET", URL: "http://a.test/" + strings.Repeat("a", MaxFetchFrame)})
	if _, err := ReadResponseTo(&resp, Limits{MaxBytes: 1, MaxFiles: 1, Broker: tableBroker{}, Answers: io.Discard}, nil); !errors.Is(err, ErrProtocol) {
		t.Errorf("an oversized fetch: %v", err)
	}
	var ans bytes.Buffer
	WriteJSON(&ans, TypeAnswer, FetchAnswer{ID: 1, Status: 200, Size: 2})
	WriteFrame(&ans, TypeBody, []byte("abc"))
	if _, _, err := ReadAnswer(NewReader(&ans)); !errors.Is(err, ErrProtocol) {
		t.Errorf("an answer longer than its size: %v", err)
	}
	ans.Reset()
	WriteJSON(&ans, TypeAnswer, FetchAnswer{ID: 1, Status: 200, Size: MaxFetchBody + 1})
	if _, _, err := ReadAnswer(NewReader(&ans)); !errors.Is(err, ErrProtocol) {
		t.Errorf("an answer over MaxFetchBody: %v", err)
	}
}

type blockingBroker chan struct{}

func (b blockingBroker) Fetch(FetchRequest) (FetchAnswer, []byte) {
	<-b
	return FetchAnswer{Status: 204}, nil
}

// An agent that asks for more than MaxFetchesPending at once breaks the
// protocol: the host does not start another fetch for it.
func TestPendingFetchesAreBounded(t *testing.T) {
	var resp bytes.Buffer
	for i := range MaxFetchesPending + 1 {
		WriteJSON(&resp, TypeFetch, FetchRequest{ID: uint32(i), Method: "GET", URL: "http://a.test/"})
	}
	b := make(blockingBroker)
	defer close(b)
	if _, err := ReadResponseTo(&resp, Limits{MaxBytes: 1, MaxFiles: 1, Broker: b, Answers: io.Discard}, nil); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "pending") {
		t.Errorf("%d fetches at once: %v", MaxFetchesPending+1, err)
	}
}
