package agent

import (
	"bufio"
	"errors"
	"io"
	"sync"

	"github.com/renderbox/renderbox/internal/wire"
)

// brokerClient puts a URL page's requests to the host, the sandbox having
// no network: each is a wire.TypeFetch frame on the agent's stdout, each
// answer a wire.TypeAnswer frame (and its body) on its stdin, matched by
// id. docs/security.md, "Fetching on the host".
type brokerClient struct {
	// wmu serializes the frames on out, which the job's outputs use once
	// the page is printed: close stops the requests before that.
	wmu    sync.Mutex
	out    *bufio.Writer
	closed bool

	mu      sync.Mutex
	next    uint32
	waiting map[uint32]chan brokerAnswer
	err     error // why answers stopped coming
}

type brokerAnswer struct {
	a    wire.FetchAnswer
	body []byte
}

var errBrokerClosed = errors.New("the host's broker is closed")

// newBrokerClient reads the host's answers from in until it ends.
func newBrokerClient(in io.Reader, out *bufio.Writer) *brokerClient {
	b := &brokerClient{out: out, waiting: map[uint32]chan brokerAnswer{}}
	go b.read(wire.NewReader(in))
	return b
}

func (b *brokerClient) read(fr *wire.Reader) {
	for {
		a, body, err := wire.ReadAnswer(fr)
		b.mu.Lock()
		if err != nil {
			b.err = err
			for id, ch := range b.waiting {
				close(ch)
				delete(b.waiting, id)
			}
			b.mu.Unlock()
			return
		}
		ch, ok := b.waiting[a.ID]
		delete(b.waiting, a.ID)
		b.mu.Unlock()
		if ok {
			ch <- brokerAnswer{a, body}
		}
	}
}

// fetch asks the host for url and waits for its answer; an error means
// none came (the host's stream ended, or the broker was closed).
func (b *brokerClient) fetch(method, url string) (wire.FetchAnswer, []byte, error) {
	ch := make(chan brokerAnswer, 1)
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		return wire.FetchAnswer{}, nil, b.err
	}
	if len(b.waiting) >= wire.MaxFetchesPending {
		b.mu.Unlock()
		return wire.FetchAnswer{Refused: "pending", Error: "too many requests waiting for the host"}, nil, nil
	}
	b.next++
	id := b.next
	b.waiting[id] = ch
	b.mu.Unlock()
	b.wmu.Lock()
	err := errBrokerClosed
	if !b.closed {
		if err = wire.WriteJSON(b.out, wire.TypeFetch, wire.FetchRequest{ID: id, Method: method, URL: url}); err == nil {
			err = b.out.Flush()
		}
	}
	b.wmu.Unlock()
	if err != nil {
		b.mu.Lock()
		delete(b.waiting, id)
		b.mu.Unlock()
		return wire.FetchAnswer{}, nil, err
	}
	ans, ok := <-ch
	if !ok {
		b.mu.Lock()
		err := b.err
		b.mu.Unlock()
		return wire.FetchAnswer{}, nil, err
	}
	return ans.a, ans.body, nil
}

// close stops the requests: after it nothing more is written to out.
func (b *brokerClient) close() {
	b.wmu.Lock()
	b.closed = true
	b.wmu.Unlock()
}
