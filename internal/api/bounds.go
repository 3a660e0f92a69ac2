package api

import (
	"encoding/base64"
	"fmt"
	"io"

	"github.com/renderbox/renderbox/internal/bytesize"
	"github.com/renderbox/renderbox/internal/render"
)

// bodyLimit is the largest body that can carry an input of maxInput bytes:
// its base64 (with room for line breaks and escaped slashes) in JSON, or
// the raw bytes in multipart, plus the four small fields and some slack.
func bodyLimit(maxInput int64, json bool) int64 {
	n := maxInput
	if json {
		n = int64(base64.StdEncoding.EncodedLen(int(maxInput))) * 9 / 8
	}
	return n + 4*maxFieldBytes + bodySlack
}

// boundedBody counts what is read from the body and fails past its limit,
// which only ever goes down.
type boundedBody struct {
	r     io.Reader
	n     int64
	limit int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.n > b.limit {
		return 0, b.tooLarge()
	}
	if rem := b.limit - b.n + 1; int64(len(p)) > rem {
		p = p[:rem]
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.n > b.limit {
		return n, b.tooLarge()
	}
	return n, err
}

func (b *boundedBody) tighten(limit int64) error {
	b.limit = min(b.limit, limit)
	if b.n > b.limit {
		return b.tooLarge()
	}
	return nil
}

func (b *boundedBody) tooLarge() error {
	return fmt.Errorf("%w: the request body is over %s", errBodyTooLarge, bytesize.String(b.limit))
}

// inputBuffer holds the decoded input, refusing bytes past max.
type inputBuffer struct {
	b    []byte
	max  int64
	who  string // whose limit max is, for the error
	hint int64  // the input size the body's length suggests; 0 if unknown
}

func (ib *inputBuffer) Write(p []byte) (int, error) {
	if int64(len(ib.b))+int64(len(p)) > ib.max {
		return 0, ib.tooLarge()
	}
	if ib.b == nil && ib.hint > 0 {
		// One allocation of the likely size, never over the limit:
		// growing by appends would copy a 40 MB input several times.
		ib.b = make([]byte, 0, min(ib.hint, ib.max))
	}
	ib.b = append(ib.b, p...)
	return len(p), nil
}

func (ib *inputBuffer) tighten(max int64, who string) error {
	if max < ib.max {
		ib.max, ib.who = max, who
	}
	if int64(len(ib.b)) > ib.max {
		return ib.tooLarge()
	}
	return nil
}

func (ib *inputBuffer) tooLarge() error {
	return fmt.Errorf("%w: the input is over %s, the most %s accepts", render.ErrInputTooLarge, bytesize.String(ib.max), ib.who)
}
