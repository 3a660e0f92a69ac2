package apiserver_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The API validates jobs against the catalogue but never runs a sandbox:
// neither the sandbox runtime nor the OCI spec it builds may be linked
// into it, however indirectly (docs/design.md, "The catalogue and the runtime").
func TestAPILinksNoRuntime(t *testing.T) {
	const root = "github.com/renderbox/renderbox/cmd/api"
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, root).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		imports[f[0]] = f[1:]
	}
	if len(imports[root]) == 0 {
		t.Fatalf("go list named no imports of %s:\n%s", root, out)
	}
	for _, banned := range []string{"github.com/renderbox/renderbox/internal/sandbox", "github.com/opencontainers/runtime-spec/specs-go"} {
		if chain := importChain(imports, root, banned); chain != nil {
			t.Errorf("cmd/api links %s: %s", banned, strings.Join(chain, " → "))
		}
	}
}

// importChain is the shortest chain of imports from one package to another,
// nil if there is none.
func importChain(imports map[string][]string, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append([]string{p}, chain...)
			}
			return chain
		}
		for _, q := range imports[p] {
			if _, seen := prev[q]; !seen {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return nil
}
