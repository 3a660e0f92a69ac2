//go:build !unit

package api_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// rawAnswer is what a hand-written client read back: the interim (1xx)
// statuses, then the final answer.
type rawAnswer struct {
	interim []int
	status  int
	header  http.Header
	body    []byte
	code    string
	sendErr error // from writing the body, if it was sent
	err     error // from reading the answer
	// after is what reading on after the answer gave: io.EOF when the
	// server ended the connection in order (a FIN), not with a reset.
	after error
}

// rawBody is a request body as a hand-written client sends it.
type rawBody struct {
	contentType string
	size        int64 // its Content-Length; -1 sends it chunked
	open        func() io.Reader
	expect      bool // send "Expect: 100-continue" and wait for it
	// sendFirst: read nothing but the 100 Continue until the body is
	// sent (or its sending failed), as a client in one thread does.
	sendFirst bool
}

// jsonBody is a JSON submission for renderer whose input_base64 is n
// bytes of "A", made as it is sent.
func jsonBody(renderer string, n int64, chunked, expect bool) rawBody {
	head := `{"renderer":"` + renderer + `","input_base64":"`
	tail := `"}`
	size := int64(len(head)) + n + int64(len(tail))
	if chunked {
		size = -1
	}
	return rawBody{contentType: "application/json", size: size, expect: expect, open: func() io.Reader {
		return io.MultiReader(strings.NewReader(head), io.LimitReader(repeatA{}, n), strings.NewReader(tail))
	}}
}

type repeatA struct{}

func (repeatA) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'A'
	}
	return len(p), nil
}

// rawPost posts b to /v1/jobs on a connection of its own, the way curl
// does: the head first; the body at once, or after a 100 Continue when
// b.expect; the answer read all the while, so an early one is seen.
func (k *keyed) rawPost(b rawBody) rawAnswer {
	conn, err := net.Dial("tcp", strings.TrimPrefix(k.srv.URL, "http://"))
	if err != nil {
		return rawAnswer{err: err}
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	head := "POST /v1/jobs HTTP/1.1\r\nHost: renderbox.test\r\nAuthorization: Bearer " + k.key + "\r\nContent-Type: " + b.contentType + "\r\n"
	if b.size < 0 {
		head += "Transfer-Encoding: chunked\r\n"
	} else {
		head += fmt.Sprintf("Content-Length: %d\r\n", b.size)
	}
	if b.expect {
		head += "Expect: 100-continue\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		return rawAnswer{err: err}
	}
	var a rawAnswer
	var sending sync.WaitGroup
	send := func() {
		sending.Add(1)
		go func() {
			defer sending.Done()
			body := b.open()
			if b.size < 0 {
				body = io.MultiReader(&chunker{r: body}, strings.NewReader("0\r\n\r\n"))
			}
			_, a.sendErr = io.Copy(conn, body)
		}()
	}
	if !b.expect {
		send()
		if b.sendFirst {
			sending.Wait()
		}
	}
	br := bufio.NewReader(conn)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			a.err = err
			break
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			a.interim = append(a.interim, resp.StatusCode)
			if resp.StatusCode == http.StatusContinue && b.expect && len(a.interim) == 1 {
				send()
				if b.sendFirst {
					sending.Wait()
				}
			}
			continue
		}
		a.status, a.header = resp.StatusCode, resp.Header
		a.body, a.err = io.ReadAll(resp.Body)
		var p struct {
			Code string `json:"code"`
		}
		if resp.Header.Get("Content-Type") == "application/problem+json" {
			_ = json.Unmarshal(a.body, &p)
		}
		a.code = p.Code
		if a.err == nil {
			_, a.after = br.ReadByte()
		}
		break
	}
	// The answer is in: stop sending, as a client does on an early answer.
	_ = conn.Close()
	sending.Wait()
	return a
}

// rawPosts makes n rawPosts at once, the i-th of body(i).
func (k *keyed) rawPosts(n int, body func(i int) rawBody) []rawAnswer {
	answers := make([]rawAnswer, n)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() { answers[i] = k.rawPost(body(i)) })
	}
	wg.Wait()
	return answers
}

// chunker frames what r reads as HTTP/1.1 chunks.
type chunker struct {
	r   io.Reader
	buf [32 << 10]byte
	out []byte
}

func (c *chunker) Read(p []byte) (int, error) {
	if len(c.out) == 0 {
		n, err := c.r.Read(c.buf[:])
		if n == 0 {
			return 0, err
		}
		c.out = append(fmt.Appendf(c.out[:0], "%x\r\n", n), c.buf[:n]...)
		c.out = append(c.out, "\r\n"...)
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	return n, nil
}

// Several clients at once, each posting a body whose Content-Length is
// over the route's bound with "Expect: 100-continue", all read a 413
// problem, and none is told 100 Continue first: the API answers from the
// declared length, before it reads a byte.
func TestDeclaredBodyOverTheBoundIsRefusedBeforeContinue(t *testing.T) {
	k := newKeyed(t)
	// 64 MiB is the bound for JSON, 50 MiB + 96 KiB for multipart (the
	// largest renderer's input in its encoding, with -max-body-bytes).
	multipart := rawBody{contentType: "multipart/form-data; boundary=b", size: 51 << 20, expect: true,
		open: func() io.Reader { return io.LimitReader(repeatA{}, 51<<20) }}
	answers := k.rawPosts(6, func(i int) rawBody {
		if i%3 == 2 {
			return multipart
		}
		return jsonBody("dot-svg", 65<<20, false /* chunked */, true /* expect */)
	})
	for i, a := range answers {
		if len(a.interim) != 0 || a.status != 413 || a.code != "input_too_large" || a.err != nil || !errors.Is(a.after, io.EOF) ||
			!strings.Contains(string(a.body), "(Content-Length)") {
			t.Errorf("client %d: interim %v, then %d %q (%s, read error %v, then %v); want 413 input_too_large, no 100 Continue, then the end of the connection", i, a.interim, a.status, a.code, a.body, a.err, a.after)
		}
	}
}

// The reported case: four clients at once post 20 MB JSON bodies for
// dot-svg (2 MiB inputs) with "Expect: 100-continue". The length is within
// the route's bound, so each is told 100 Continue and cut once the input
// passes dot-svg's limit; every client still reads the 413 problem.
func TestBodyCutMidwayStillReadsTheAnswer(t *testing.T) {
	k := newKeyed(t)
	for _, c := range []struct {
		name                       string
		chunked, expect, sendFirst bool
	}{
		{"content-length, expect", false, true, false},
		{"content-length", false, false, false},
		{"chunked, expect", true, true, false},
		{"chunked", true, false, false},
		{"content-length, expect, send first", false, true, true},
		{"content-length, send first", false, false, true},
		{"chunked, expect, send first", true, true, true},
		{"chunked, send first", true, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			answers := k.rawPosts(4, func(int) rawBody {
				b := jsonBody("dot-svg", 20<<20, c.chunked, c.expect)
				b.sendFirst = c.sendFirst
				return b
			})
			for i, a := range answers {
				if a.status != 413 || a.code != "input_too_large" || a.err != nil {
					t.Errorf("client %d: interim %v, then %d %q (%s, read error %v, send error %v); want 413 input_too_large", i, a.interim, a.status, a.code, a.body, a.err, a.sendErr)
				}
				// A client reading as it sends sees the answer end in a
				// FIN and stops; no reset reaches it (one came right
				// behind the answer, failing the client's send). One that
				// reads only once its sending failed meets the reset that
				// follows net/http's grace, its answer still in its buffer.
				if !c.sendFirst && (!errors.Is(a.after, io.EOF) || errors.Is(a.sendErr, syscall.ECONNRESET)) {
					t.Errorf("client %d: after the answer the connection gave %v, sending %v; want io.EOF (a FIN) and no reset", i, a.after, a.sendErr)
				}
			}
		})
	}
}
