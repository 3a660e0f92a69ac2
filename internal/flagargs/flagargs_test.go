package flagargs

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		args      []string
		pos, o, r string
	}{
		{[]string{"-r", "html-pdf", "-o", "out/", "a.html"}, "a.html", "out/", "html-pdf"},
		{[]string{"a.html", "-r", "html-pdf", "b.css", "-o", "out/"}, "a.html b.css", "out/", "html-pdf"},
		{[]string{"-r", "x", "a", "--", "-o", "b"}, "a -o b", "", "x"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		o, r := fs.String("o", "", ""), fs.String("r", "", "")
		pos, err := Parse(fs, c.args)
		if err != nil || strings.Join(pos, " ") != c.pos || *o != c.o || *r != c.r {
			t.Errorf("Parse(%q): %q -o %q -r %q %v", c.args, pos, *o, *r, err)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := Parse(fs, []string{"a", "-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h after an argument: %v, want flag.ErrHelp", err)
	}
}
