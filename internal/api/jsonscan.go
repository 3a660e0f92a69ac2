package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonScanner reads the top level of a JSON object from a stream, one
// token at a time, so that no value is held unless the caller asks for it
// (and then only up to a bound).
type jsonScanner struct {
	r *bufio.Reader
}

// next returns the next byte that is not JSON whitespace; io.EOF at the
// end of the stream.
func (s *jsonScanner) next() (byte, error) {
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return 0, err
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c, nil
	}
}

// expect reads the next non-space byte and refuses anything but want.
func (s *jsonScanner) expect(want byte, msg string) error {
	c, err := s.next()
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return readErr("reading the JSON body", err)
	}
	if c != want {
		return fmt.Errorf("%w: %s", errBadRequest, msg)
	}
	return nil
}

// readString reads the rest of a string whose opening quote was read,
// unescaped; errFieldTooLarge past max bytes.
func (s *jsonScanner) readString(max int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(&jsonString{r: s.r}, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, errFieldTooLarge
	}
	return b, nil
}

// readRaw reads one JSON value as its text, at most max bytes, and checks
// that it is valid JSON.
func (s *jsonScanner) readRaw(max int) ([]byte, error) {
	c, err := s.next()
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, err
	}
	buf := []byte{c}
	add := func(c byte) error {
		if len(buf) == max {
			return errFieldTooLarge
		}
		buf = append(buf, c)
		return nil
	}
	// Strings are copied as they are (escapes included); nesting is only
	// counted here, json.Valid judges it at the end.
	depth, inString, escaped := 0, c == '"', false
	switch c {
	case '{', '[':
		depth = 1
	case '"':
	default: // a number or a literal: up to the next delimiter
		for {
			c, err := s.r.ReadByte()
			if err != nil {
				return nil, noEOF(err)
			}
			if bytes.IndexByte([]byte(" \t\r\n,}]"), c) >= 0 {
				_ = s.r.UnreadByte()
				break
			}
			if err := add(c); err != nil {
				return nil, err
			}
		}
	}
	for depth > 0 || inString {
		c, err := s.r.ReadByte()
		if err != nil {
			return nil, noEOF(err)
		}
		if err := add(c); err != nil {
			return nil, err
		}
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		}
	}
	if !json.Valid(buf) {
		return nil, fmt.Errorf("%w: %.40q… is not valid JSON", errBadRequest, buf)
	}
	return buf, nil
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// jsonString reads the content of a JSON string whose opening quote was
// read, unescaping as it goes, and ends (io.EOF) at the closing quote.
type jsonString struct {
	r    *bufio.Reader
	pend []byte // an unescaped rune not yet returned
	done bool
}

func (j *jsonString) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(j.pend) > 0 {
			k := copy(p[n:], j.pend)
			j.pend, n = j.pend[k:], n+k
			continue
		}
		if j.done {
			break
		}
		// Copy a run of plain bytes straight from the buffer.
		if buf, _ := j.r.Peek(min(max(j.r.Buffered(), 1), len(p)-n)); len(buf) > 0 {
			k := 0
			for k < len(buf) && buf[k] != '"' && buf[k] != '\\' && buf[k] >= 0x20 {
				k++
			}
			if k > 0 {
				copy(p[n:], buf[:k])
				_, _ = j.r.Discard(k)
				n += k
				continue
			}
		}
		c, err := j.r.ReadByte()
		if err != nil {
			return n, noEOF(err)
		}
		switch {
		case c == '"':
			j.done = true
		case c < 0x20:
			return n, errors.New("a control character inside a string")
		default: // '\\'
			if err := j.escape(); err != nil {
				return n, err
			}
		}
	}
	if n == 0 && j.done {
		return 0, io.EOF
	}
	return n, nil
}

// escape reads the escape after a backslash into pend.
func (j *jsonString) escape() error {
	c, err := j.r.ReadByte()
	if err != nil {
		return noEOF(err)
	}
	switch c {
	case '"', '\\', '/':
		j.pend = []byte{c}
	case 'b':
		j.pend = []byte{'\b'}
	case 'f':
		j.pend = []byte{'\f'}
	case 'n':
		j.pend = []byte{'\n'}
	case 'r':
		j.pend = []byte{'\r'}
	case 't':
		j.pend = []byte{'\t'}
	case 'u':
		r, err := j.hex4()
		if err != nil {
			return err
		}
		if utf16.IsSurrogate(r) {
			// A pair: the low half must follow as another \u escape.
			if b, err := j.r.Peek(2); err != nil || string(b) != `\u` {
				return errors.New("an unpaired surrogate in a string")
			}
			_, _ = j.r.Discard(2)
			lo, err := j.hex4()
			if err != nil {
				return err
			}
			if r = utf16.DecodeRune(r, lo); r == utf8.RuneError {
				return errors.New("an invalid surrogate pair in a string")
			}
		}
		j.pend = utf8.AppendRune(nil, r)
	default:
		return fmt.Errorf("an invalid escape \\%c in a string", c)
	}
	return nil
}

func (j *jsonString) hex4() (rune, error) {
	var r rune
	for i := 0; i < 4; i++ {
		c, err := j.r.ReadByte()
		if err != nil {
			return 0, noEOF(err)
		}
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, errors.New("an invalid \\u escape in a string")
		}
		r = r<<4 | rune(c)
	}
	return r, nil
}
