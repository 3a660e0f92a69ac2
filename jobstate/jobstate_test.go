package jobstate_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/jobstate"
)

var all = []jobstate.State{jobstate.Queued, jobstate.Running, jobstate.Succeeded, jobstate.Failed, jobstate.Canceled}

// The states are the contract's: openapi.yaml's State enum, in order.
func TestStatesAreTheContracts(t *testing.T) {
	b, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^    State:\n      type: string\n      enum: \[([a-z, ]+)\]`).FindSubmatch(b)
	if m == nil {
		t.Fatal("openapi.yaml has no State schema with an enum")
	}
	var want []jobstate.State
	for s := range strings.SplitSeq(string(m[1]), ",") {
		want = append(want, jobstate.State(strings.TrimSpace(s)))
	}
	if !slices.Equal(all, want) {
		t.Errorf("got states %v, want openapi.yaml's %v", all, want)
	}
}

func TestTerminalAndValid(t *testing.T) {
	for _, s := range all {
		terminal := s != jobstate.Queued && s != jobstate.Running
		if s.Terminal() != terminal || !s.Valid() {
			t.Errorf("%s: got Terminal %v Valid %v, want %v true", s, s.Terminal(), s.Valid(), terminal)
		}
	}
	for _, s := range []jobstate.State{"", "done", "Queued", "cancelled"} {
		if s.Valid() || s.Terminal() {
			t.Errorf("%q: got Valid %v Terminal %v, want false false", s, s.Valid(), s.Terminal())
		}
	}
}

// A State is a plain JSON string, as the API and the queue's events have
// always carried it.
func TestJSONIsAPlainString(t *testing.T) {
	b, err := json.Marshal(struct {
		State jobstate.State `json:"state"`
	}{jobstate.Succeeded})
	if err != nil || string(b) != `{"state":"succeeded"}` {
		t.Errorf("got %s, %v; want {\"state\":\"succeeded\"}", b, err)
	}
}
