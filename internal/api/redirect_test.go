package api

import "testing"

func TestETagMatches(t *testing.T) {
	const e = `"abc"`
	for _, c := range []struct {
		header string
		want   bool
	}{
		{`"abc"`, true}, {`W/"abc"`, true}, {`"x", "abc"`, true}, {` * `, true}, {`"x",,W/"abc" `, true},
		{"", false}, {`"ab"`, false}, {`"abcd"`, false}, {`abc`, false},
	} {
		if got := etagMatches(c.header, e); got != c.want {
			t.Errorf("etagMatches(%q) = %v, want %v", c.header, got, c.want)
		}
	}
}
