package ledger

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
)

// cursor is the position after which the next page of ListJobs starts: the
// (created_at, id) of the last job returned. Clients get it as opaque
// base64url text: 8 bytes of big-endian unix nanoseconds, then the id.
type cursor struct {
	createdAt int64
	id        string
}

func encodeCursor(c cursor) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(c.createdAt))
	return base64.RawURLEncoding.EncodeToString(append(b, c.id...))
}

func decodeCursor(s string) (cursor, error) {
	// The decoder skips \r and \n even when strict (found by
	// FuzzDecodeCursor): only the text encodeCursor makes is a cursor.
	if strings.ContainsAny(s, "\r\n") {
		return cursor{}, fmt.Errorf("decode cursor: %w", ErrBadCursor)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) < 9 || !validJobID(string(b[8:])) {
		return cursor{}, fmt.Errorf("decode cursor: %w", ErrBadCursor)
	}
	return cursor{createdAt: int64(binary.BigEndian.Uint64(b)), id: string(b[8:])}, nil
}
