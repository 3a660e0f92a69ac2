//go:build !unit

package e2e

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// With the broker on, the sandbox still has no network (issue 29, "Must
// show"): the worker's self-test passes as it starts with
// -remote-content; the escape probe, run as a job on that worker, finds
// every attempt refused; and the hostile corpus's pages, given by url so
// that their sandboxes answer through the broker, reach none of the
// canaries — not by the requests Chromium puts to the host (the policy
// refuses them) nor by what it would open itself (a WebSocket, which no
// interception sees: the sandbox has no route). One stack for the three,
// the cheapest way to run each with the broker on.
func TestSandboxHoldsWithTheBrokerOn(t *testing.T) {
	var env corpusEnv
	// Beside loopback, an address of the host's own: what a sandbox
	// with a network interface would reach first.
	canaries := env.openCanaries(t, "127.0.0.1:0", "127.0.0.2:0", "[::1]:0", net.JoinHostPort(hostAddress(t), "0"))
	s := newStack(t, stackOpts{apiArgs: []string{"-remote-content", "-diagnostics"},
		workerArgs: []string{"-remote-content", "-remote-allow", "127.0.0.3/32"}})
	env.StateDir = s.workerSB.StateDir
	c, key := s.client, s.key("mallory")

	t.Run("the self-test", func(t *testing.T) {
		log := s.worker.output()
		for _, check := range []string{"self-test", "loopback only", "no route to the host"} {
			if !strings.Contains(log, `"check":"`+check+`","verdict":"pass"`) {
				t.Errorf("the worker's start-up with -remote-content has no passing %q check", check)
			}
		}
	})

	t.Run("the escape probe", func(t *testing.T) {
		_, j := submitJSON(t, c, key, "sandbox-probe", []byte("probe\n"), nil, "?wait=60", nil)
		if j.State != "succeeded" || len(j.Outputs) != 1 {
			t.Fatalf("probe job = %s %+v", j.State, j.Error)
		}
		checkEscapeReport(t, c, key, j)
	})

	t.Run("the hostile pages by url", func(t *testing.T) {
		victimKey := s.key("victim")
		_, victim := submitJSON(t, c, victimKey, "html-pdf", samples.HTML("Victim", env.Secret), nil, "", nil)
		files := map[string][]byte{}
		var cases []hostileCase
		for _, tc := range loadCorpus(t, env) {
			// The pages whose point is reaching out; the endless and the
			// memory-hungry ones test limits, not the network.
			if tc.renderer == "html-pdf" && slices.Contains(tc.want, "succeeded") {
				files[fmt.Sprintf("/%d.html", len(cases))] = tc.input
				cases = append(cases, tc)
			}
		}
		if len(cases) < 3 {
			t.Fatalf("%d of the corpus's pages found, want its html-references and html-local-files ones", len(cases))
		}
		base, _ := fileServer(t, "127.0.0.3", files, nil)
		extractor := testenv.Manager(t, sandbox.Config{})
		for i, tc := range cases {
			_, j := submitURL(t, c, key, "html-pdf", fmt.Sprintf("%s/%d.html", base, i), tc.options)
			got := outcome(j.State, j.Error)
			if !slices.Contains(tc.want, got) {
				t.Errorf("%s by url: ended %s (%+v), want one of %v", tc.name, got, j.Error, tc.want)
				continue
			}
			t.Logf("%-50s %s; %d refused", tc.name+" by url", got, len(j.Diagnostics.RefusedRequests))
			if strings.HasPrefix(tc.name, "html-references") && !slices.ContainsFunc(j.Diagnostics.RefusedRequests, func(r string) bool {
				return strings.Contains(r, env.Canaries[0]) && strings.HasSuffix(r, "(refused: address)")
			}) {
				t.Errorf("%s by url: refused %v, want the canary %s refused for its address", tc.name, j.Diagnostics.RefusedRequests, env.Canaries[0])
			}
			if j.State != "succeeded" || len(tc.noLeak) == 0 {
				continue
			}
			text := testenv.PDFText(t, extractor, c.do("GET", j.Outputs[0].URL, key, "", nil, nil).Body)
			for _, leak := range tc.noLeak {
				if strings.Contains(text, leak) {
					t.Errorf("%s by url: the output shows %q", tc.name, leak)
				}
			}
		}
		for _, cn := range canaries {
			if n := cn.Hits(); n != 0 {
				t.Errorf("canary %s got %d connections from URL pages' sandboxes or the broker", cn.Addr(), n)
			}
		}
		if vj := waitEnded(t, c, victimKey, victim.ID, time.Minute); vj.State != "succeeded" {
			t.Errorf("the victim job ended %s", vj.State)
		}
	})
}
