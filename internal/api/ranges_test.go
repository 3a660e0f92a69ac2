package api

import (
	"net/http"
	"strings"
	"testing"
)

// boundRanges leaves http.ServeContent at most maxRanges ranges, merged
// and in the order asked; a header it drops is answered whole.
func TestBoundRanges(t *testing.T) {
	const size = 1000
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"bytes=0-9", "bytes=0-9"},
		{"bytes=-10", "bytes=990-999"},
		{"bytes=-2000", "bytes=0-999"},
		{"bytes=990-", "bytes=990-999"},
		{"bytes=5-5000", "bytes=5-999"},
		{"bytes= 0-9 , 10-19 ,,", "bytes=0-19"}, // adjacent; whitespace and empty elements as ServeContent takes them
		{"bytes=500-599,0-99,50-149,-100,-50", "bytes=500-599,0-149,900-999"},
		{"bytes=" + strings.Repeat("0-0,-1,", 8), "bytes=0-0,999-999"},
		{"bytes=0-0,2-2,4-4,6-6,8-8,10-10,12-12,14-14,16-16,18-18,20-20,22-22,24-24,26-26,28-28,30-30", "bytes=0-0,2-2,4-4,6-6,8-8,10-10,12-12,14-14,16-16,18-18,20-20,22-22,24-24,26-26,28-28,30-30"},
		{"bytes=0-0,2-2,4-4,6-6,8-8,10-10,12-12,14-14,16-16,18-18,20-20,22-22,24-24,26-26,28-28,30-30,32-32", ""}, // 17: whole
		{"bytes=" + strings.TrimSuffix(strings.Repeat("7-7,", 256), ","), "bytes=7-7"},
		{"bytes=" + strings.TrimSuffix(strings.Repeat("7-7,", 257), ","), ""},
		{"bytes=" + strings.Repeat("2000-,", 300), ""}, // counted as written, satisfiable or not
		{"bytes=1000-", "bytes=1000-"},         // past the end: ServeContent's 416
		{"bytes=2000-x,1000-1", "bytes=1000-"}, // as ServeContent, past the end whatever follows
		{"bytes=-0", "bytes=1000-"},
		{"bytes=5-1", rangeMalformed},
		{"bytes=0-9,x", rangeMalformed},
		{"bytes=--5", rangeMalformed},
		{"bytes=-", rangeMalformed},
		{"Bytes=0-9", rangeMalformed},
		{"items=0-9", rangeMalformed},
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		if c.in != "" {
			r.Header.Set("Range", c.in)
		}
		boundRanges(r, size)
		if got := r.Header.Get("Range"); got != c.want {
			in := c.in
			if len(in) > 60 {
				in = in[:60] + "…"
			}
			t.Errorf("Range %q: got %q, want %q", in, got, c.want)
		}
	}
}
