package apiserver

import (
	"testing"

	"github.com/renderbox/renderbox/internal/envflag/envflagtest"
)

// Every flag of api serve and api keys has its RENDERBOX_ variable and its
// row in docs/settings.md, so the two cannot drift.
func TestSettingsAreDocumented(t *testing.T) {
	rows := envflagtest.Table(t, "../../docs/settings.md")
	fs, _ := serveFlags(new(Config))
	envflagtest.Check(t, rows, "api", fs, notSettings...)
	for _, sub := range []string{"create", "revoke", "list"} {
		fs, _, _ := keysFlags(sub, new(Config))
		envflagtest.Check(t, rows, "api", fs, notSettings...)
	}
}
