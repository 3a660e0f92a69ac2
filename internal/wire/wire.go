// Package wire is the framed protocol spoken over a sandbox's stdin and
// stdout. The host writes one request (a JSON header, then the input bytes);
// the agent inside the sandbox answers with its output files and a JSON
// result. Nothing the sandbox writes is ever opened by path on the host: every
// byte comes back through these frames, read with hard caps.
//
// A frame is one type byte, a big-endian uint32 payload length and the
// payload. Payloads are at most MaxFrame bytes, so a reader never allocates
// more than that for one frame whatever the peer claims.
package wire

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Frame types.
const (
	TypeRequest byte = 'Q' // JSON Request; first frame of a request
	TypeInput   byte = 'I' // a chunk of the input file
	TypeFile    byte = 'F' // JSON FileHeader; Data frames of that file follow
	TypeData    byte = 'D' // a chunk of the current output file
	TypeResult  byte = 'R' // JSON Result; last frame of a response
	TypeReady   byte = 'W' // JSON Ready; a warm agent has booted and waits for its request
)

// MaxFrame is the largest payload a frame may carry.
const MaxFrame = 1 << 20

// ErrFrameTooLarge means the peer announced a frame over MaxFrame.
var ErrFrameTooLarge = errors.New("frame larger than the protocol allows")

// WriteFrame writes one frame.
func WriteFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > MaxFrame {
		return fmt.Errorf("writing frame %q of %d bytes: %w", typ, len(payload), ErrFrameTooLarge)
	}
	var hdr [5]byte
	hdr[0] = typ
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// WriteJSON writes v as the JSON payload of one frame.
func WriteJSON(w io.Writer, typ byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding frame %q: %w", typ, err)
	}
	return WriteFrame(w, typ, b)
}

// WriteChunks copies r to w as frames of type typ, each at most MaxFrame
// bytes, and returns the number of bytes copied.
func WriteChunks(w io.Writer, typ byte, r io.Reader) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	for {
		k, err := r.Read(buf)
		if k > 0 {
			if werr := WriteFrame(w, typ, buf[:k]); werr != nil {
				return n, werr
			}
			n += int64(k)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// Reader reads frames, never allocating more than MaxFrame for one.
type Reader struct {
	r   io.Reader
	buf []byte
}

// NewReader returns a frame reader over r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Next reads one frame. The payload is valid until the next call.
// A clean end of stream before a frame starts is io.EOF; a stream cut inside
// a frame is io.ErrUnexpectedEOF.
func (fr *Reader) Next() (typ byte, payload []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(fr.r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("frame %q announces %d bytes: %w", hdr[0], n, ErrFrameTooLarge)
	}
	if cap(fr.buf) < int(n) {
		fr.buf = make([]byte, n)
	}
	fr.buf = fr.buf[:n]
	if _, err := io.ReadFull(fr.r, fr.buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return hdr[0], fr.buf, nil
}
