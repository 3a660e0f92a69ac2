package main

import (
	"bufio"
	"strings"
	"testing"
)

// The pool's idle gauge is picked per family out of the text format, and a
// worker without it reads as no pool.
func TestParsePoolIdle(t *testing.T) {
	text := `# HELP renderbox_pool_idle Idle sandboxes in the pool.
# TYPE renderbox_pool_idle gauge
renderbox_pool_idle{family="chromium"} 2
renderbox_pool_idle{family="light",extra="x"} 1
renderbox_pool_idle_seconds{family="office"} 9
go_goroutines 12
`
	got := parsePoolIdle(bufio.NewScanner(strings.NewReader(text)))
	want := map[string]float64{"chromium": 2, "light": 1}
	if len(got) != len(want) || got["chromium"] != 2 || got["light"] != 1 {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := parsePoolIdle(bufio.NewScanner(strings.NewReader("go_goroutines 12\n"))); got != nil {
		t.Errorf("without the gauge: got %v, want nil", got)
	}
}

// Host CPU is read, positive, and never goes back.
func TestHostCPU(t *testing.T) {
	a, err := hostCPU()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := hostCPU()
	if a <= 0 || b < a {
		t.Errorf("got %v then %v, want positive and not decreasing", a, b)
	}
}
