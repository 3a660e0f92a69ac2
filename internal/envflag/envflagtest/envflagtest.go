// Package envflagtest keeps docs/settings.md's table of settings true to the
// flags the binaries define: a test of each binary hands it its flag sets.
package envflagtest

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/envflag"
)

// Row is one line of docs/settings.md's settings table.
type Row struct {
	Of, Flag, Var, Default, What string
}

// Table reads the settings table of the file at path (docs/settings.md):
// rows of | of | flag | variable | default | what |, code spans unwrapped.
func Table(t testing.TB, path string) []Row {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	section := string(b)
	var rows []Row
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`-") {
			continue
		}
		for i := range cells {
			cells[i] = strings.Trim(strings.TrimSpace(cells[i]), "`")
		}
		rows = append(rows, Row{Of: cells[0], Flag: strings.TrimPrefix(cells[1], "-"), Var: cells[2], Default: cells[3], What: cells[4]})
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no rows in the settings table", path)
	}
	return rows
}

// Check fails t for each flag of fs (but skip: a command's arguments) that
// has no row of its own for binary ("api", "worker") in rows, or whose
// row names another variable than envflag.Var's.
func Check(t testing.TB, rows []Row, binary string, fs *flag.FlagSet, skip ...string) {
	t.Helper()
	skipped := map[string]bool{}
	for _, s := range skip {
		skipped[s] = true
	}
	fs.VisitAll(func(f *flag.Flag) {
		if skipped[f.Name] {
			return
		}
		for _, r := range rows {
			if r.Flag == f.Name && strings.Contains(r.Of, binary) {
				if r.Var != envflag.Var(f.Name) {
					t.Errorf("docs/settings.md: -%s of %s names %s, want %s", f.Name, binary, r.Var, envflag.Var(f.Name))
				}
				if r.What == "" {
					t.Errorf("docs/settings.md: -%s of %s says nothing of what it does", f.Name, binary)
				}
				return
			}
		}
		t.Errorf("docs/settings.md: no row for -%s (%s) of %s: add | %s | `-%s` | `%s` | %s | %s |", f.Name, fs.Name(), binary, binary, f.Name, envflag.Var(f.Name), f.DefValue, f.Usage)
	})
}
