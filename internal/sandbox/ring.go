package sandbox

import "sync"

// ring keeps the last n bytes written to it; safe for concurrent use.
type ring struct {
	mu  sync.Mutex
	n   int
	buf []byte
}

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	if len(r.buf) > 2*r.n {
		r.buf = append(r.buf[:0], r.buf[len(r.buf)-r.n:]...)
	}
	return len(p), nil
}

func (r *ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) > r.n {
		return string(r.buf[len(r.buf)-r.n:])
	}
	return string(r.buf)
}
