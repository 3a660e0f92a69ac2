package fetch

import (
	"context"
	"sync"
)

// KeySlots bounds each key's fetches in flight, so one tenant's pages or
// submissions cannot take every connection the host makes on clients'
// behalf (issue 29: "per key: fetch concurrency"). The API takes a slot
// or refuses (TryTake, 429); a worker's broker waits for one (Take),
// inside the job's context.
type KeySlots struct {
	max  int
	mu   sync.Mutex
	keys map[string]*keySlot
}

// keySlot is one key's fetches in flight; wake is closed, and replaced,
// each time one ends, for the fetches waiting.
type keySlot struct {
	n    int
	wake chan struct{}
}

// NewKeySlots bounds each key to max fetches at once.
func NewKeySlots(max int) *KeySlots {
	return &KeySlots{max: max, keys: map[string]*keySlot{}}
}

// TryTake takes one of key's slots, false when all are taken.
func (s *KeySlots) TryTake(key string) bool {
	_, ok := s.take(key)
	return ok
}

// Take waits for one of key's slots until ctx ends.
func (s *KeySlots) Take(ctx context.Context, key string) error {
	for {
		wake, ok := s.take(key)
		if ok {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// take takes a slot, or says what to wait on for one.
func (s *KeySlots) take(key string) (<-chan struct{}, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[key]
	if k == nil {
		k = &keySlot{wake: make(chan struct{})}
		s.keys[key] = k
	}
	if k.n >= s.max {
		return k.wake, false
	}
	k.n++
	return nil, true
}

// Give returns a slot Take or TryTake took.
func (s *KeySlots) Give(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[key]
	k.n--
	close(k.wake)
	k.wake = make(chan struct{})
	if k.n <= 0 {
		delete(s.keys, key)
	}
}
