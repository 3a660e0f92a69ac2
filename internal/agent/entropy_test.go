package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// freshPDFID replaces the trailer's /ID pair with random hex of the same
// length and case, equal halves staying equal, and nothing else: a /ID
// in the document's content before the trailer is not touched.
func TestFreshPDFIDReplacesOnlyTheTrailersID(t *testing.T) {
	body := "%PDF-1.6\n1 0 obj\n<< /Length 30 >>\nstream\n/ID [ <AAAA> <AAAA> ]\nendstream\nendobj\n"
	tail := "trailer\n<</Size 2\n/Root 1 0 R\n/ID [ <0123456789ABCDEF0123456789ABCDEF>\n<0123456789ABCDEF0123456789ABCDEF> ]\n>>\nstartxref\n10\n%%EOF\n"
	for _, tc := range []struct {
		name, pdf string
		found     bool
	}{
		{"id", body + tail, true},
		{"id after a long file", string(bytes.Repeat([]byte("0000000000 65535 f \n"), 1000)) + tail, true},
		{"no trailer id", body + "trailer\n<</Size 2 /Root 1 0 R>>\nstartxref\n10\n%%EOF\n", false},
		{"no trailer", body, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "output.pdf")
			if err := os.WriteFile(p, []byte(tc.pdf), 0o600); err != nil {
				t.Fatal(err)
			}
			found, err := freshPDFID(p)
			if err != nil || found != tc.found {
				t.Fatalf("freshPDFID = %v, %v; want %v, nil", found, err, tc.found)
			}
			got, _ := os.ReadFile(p)
			if len(got) != len(tc.pdf) {
				t.Fatalf("the file is %d bytes, was %d", len(got), len(tc.pdf))
			}
			var changed []int
			for i := range got {
				if got[i] != tc.pdf[i] {
					changed = append(changed, i)
				}
			}
			if !tc.found {
				if len(changed) > 0 {
					t.Fatalf("a PDF without a trailer /ID changed: %q", got)
				}
				return
			}
			m := trailerID.FindSubmatch(got[bytes.LastIndex(got, []byte("trailer")):])
			if m == nil || !bytes.Equal(m[1], m[2]) || bytes.Equal(m[1], []byte("0123456789ABCDEF0123456789ABCDEF")) ||
				!bytes.Equal(bytes.ToUpper(m[1]), m[1]) {
				t.Fatalf("trailer /ID after: %q", m)
			}
			start := len(tc.pdf) - len(tail)
			for _, i := range changed {
				if i < start {
					t.Fatalf("byte %d changed, before the trailer", i)
				}
			}
		})
	}
}
