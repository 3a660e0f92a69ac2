// Package cdp is a minimal Chrome DevTools Protocol client for Chromium's
// --remote-debugging-pipe: JSON messages each ended by a NUL byte, commands
// on one pipe and replies and events on the other, flat sessions.
//
// One goroutine reads the pipe and hands each reply to the call waiting for
// it. Events go, in the order read, to a second goroutine that closes the
// channels of Await and runs the handlers of Handle. Neither runs a handler
// while holding the client's lock, so a handler may call back into the
// client (answer a paused request, set up a new target) and its reply is
// read while it waits; events after it wait until it returns.
package cdp

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// MethodNotFound is the code of the error Chromium answers a method a
// target does not have (a dedicated worker's Fetch.enable).
const MethodNotFound = -32601

// Message is one DevTools message: a command, a reply (ID set) or an event
// (Method set, ID zero).
type Message struct {
	ID        int             `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// Error is a command Chromium answered with an error.
type Error struct {
	Method  string
	Code    int
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (%d)", e.Method, e.Message, e.Code)
}

// Command is one call whose result is not needed.
type Command struct {
	Method string
	Params any
}

// Client speaks the protocol over a pair of pipes.
type Client struct {
	mu       sync.Mutex
	w        io.Writer
	next     int
	pending  map[int]chan Message
	waiters  map[string]chan struct{}
	handlers map[string]func(Message)
	// events is the queue the dispatcher drains; wake has a token when
	// it is not empty.
	events []Message
	wake   chan struct{}
	done   chan struct{}
	err    error
}

// New starts a client that writes commands to w and reads replies and
// events from r until r fails or ends.
func New(w io.Writer, r io.Reader) *Client {
	c := &Client{
		w: w, pending: map[int]chan Message{}, waiters: map[string]chan struct{}{},
		handlers: map[string]func(Message){}, wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
	go c.read(r)
	go c.dispatch()
	return c
}

func (c *Client) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<20)
	var err error
	for {
		var b []byte
		if b, err = br.ReadBytes(0); err != nil {
			break
		}
		var m Message
		if err = json.Unmarshal(b[:len(b)-1], &m); err != nil {
			err = fmt.Errorf("decoding a DevTools message: %w", err)
			break
		}
		c.mu.Lock()
		if m.ID != 0 {
			// A reply nobody waits for (Send's) is dropped.
			if ch, ok := c.pending[m.ID]; ok {
				delete(c.pending, m.ID)
				ch <- m
			}
		} else {
			c.events = append(c.events, m)
		}
		c.mu.Unlock()
		if m.ID == 0 {
			select {
			case c.wake <- struct{}{}:
			default:
			}
		}
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("chromium closed the DevTools pipe (it crashed or was killed)")
	}
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	close(c.done)
}

// dispatch delivers events in the order read, outside the lock, until the
// pipe has ended and every event read before has been delivered.
func (c *Client) dispatch() {
	for {
		c.mu.Lock()
		if len(c.events) == 0 {
			c.mu.Unlock()
			select {
			case <-c.wake:
				continue
			case <-c.done:
			}
			c.mu.Lock()
			if len(c.events) == 0 {
				c.mu.Unlock()
				return
			}
		}
		m := c.events[0]
		c.events = c.events[1:]
		key := m.SessionID + " " + m.Method
		ch := c.waiters[key]
		delete(c.waiters, key)
		h := c.handlers[m.Method]
		c.mu.Unlock()
		if ch != nil {
			close(ch)
		}
		if h != nil {
			h(m)
		}
	}
}

// Done is closed when the pipe has ended; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the pipe ended, nil while it is open.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Call sends method and decodes its result into out (if not nil). An error
// reply is an *Error.
func (c *Client) Call(session, method string, params, out any) error {
	ch := make(chan Message, 1)
	if err := c.send(session, method, params, ch); err != nil {
		return err
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return &Error{Method: method, Code: m.Error.Code, Message: m.Error.Message}
		}
		if out != nil {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-c.done:
		return fmt.Errorf("%s: %w", method, c.Err())
	}
}

// Send sends method without waiting for its reply, which is dropped: for
// a handler's answer whose outcome changes nothing it could do.
func (c *Client) Send(session, method string, params any) error {
	return c.send(session, method, params, nil)
}

func (c *Client) send(session, method string, params any, reply chan Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	b, err := json.Marshal(Message{ID: c.next, SessionID: session, Method: method, Params: raw(params)})
	if err == nil {
		if reply != nil {
			c.pending[c.next] = reply
		}
		if _, err = c.w.Write(append(b, 0)); err != nil {
			delete(c.pending, c.next)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

// CallEach calls the commands in order and stops at the first that fails.
func (c *Client) CallEach(session string, cmds []Command) error {
	for _, cmd := range cmds {
		if err := c.Call(session, cmd.Method, cmd.Params, nil); err != nil {
			return err
		}
	}
	return nil
}

func raw(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, _ := json.Marshal(v)
	return b
}

// Await returns a channel closed when the session next sees event method,
// in its order among the events handlers see.
func (c *Client) Await(session, method string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	c.waiters[session+" "+method] = ch
	return ch
}

// Handle has h called with every later event method, of any session, in
// the order read. h runs outside the client's lock and may call the
// client; events after it wait until it returns.
func (c *Client) Handle(method string, h func(Message)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handlers[method] = h
}
