package apiserver

import (
	"strings"
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

// serve's -h says where /metrics is by default (flag prints the value)
// and that it is loopback only.
func TestMetricsAddrHelpStatesItsDefault(t *testing.T) {
	fs, _ := serveFlags(new(Config))
	f := fs.Lookup("metrics-addr")
	if f == nil || f.DefValue != "127.0.0.1:9090" || !strings.Contains(f.Usage, "the default is loopback") || !strings.Contains(f.Usage, `"" disables`) {
		t.Errorf("-metrics-addr: %+v, want its default 127.0.0.1:9090 stated as loopback only", f)
	}
}
