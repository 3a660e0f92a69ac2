package ledger

import (
	"testing"
)

// A cursor decodes only from what encodeCursor makes: decoding then
// encoding gives the client's text back.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(encodeCursor(cursor{createdAt: 1764676800000000000, id: "job_0123456789abcdef"}))
	f.Add("")
	f.Add("AAAAAAAAAAA")
	f.Add("AAAAAAAAAAA_")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := decodeCursor(s)
		if err != nil {
			return
		}
		if !validJobID(c.id) || encodeCursor(c) != s {
			t.Fatalf("%q decodes to %+v, which encodes as %q", s, c, encodeCursor(c))
		}
	})
}

func FuzzIdempotencyKey(f *testing.F) {
	for _, s := range []string{"", "order-17", "tab\there", "é", string(make([]byte, 256))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		if CheckIdempotencyKey(k) != nil {
			return
		}
		if len(k) > MaxIdempotencyKey {
			t.Fatalf("accepted a %d-byte key", len(k))
		}
		for i := 0; i < len(k); i++ {
			if k[i] < 0x20 || k[i] > 0x7e {
				t.Fatalf("accepted byte %#x", k[i])
			}
		}
	})
}
