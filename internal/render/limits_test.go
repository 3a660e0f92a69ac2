package render_test

import (
	"testing"

	"github.com/renderbox/renderbox/internal/render"
)

// Every renderer's limits are resolved as it joins the catalogue, so the
// API, the contract, plans and pool families read them without resolving
// them again.
func TestCatalogueLimitsAreResolved(t *testing.T) {
	names := []string{"sandbox-probe"}
	for _, r := range render.All() {
		names = append(names, r.Name)
	}
	for _, name := range names {
		r, err := render.LookupWithDiagnostics(name)
		if err != nil {
			t.Fatal(err)
		}
		if r.Limits != r.Limits.WithDefaults() {
			t.Errorf("%s: limits %+v, resolved %+v", name, r.Limits, r.Limits.WithDefaults())
		}
	}
}
