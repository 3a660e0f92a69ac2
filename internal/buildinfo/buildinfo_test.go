package buildinfo

import (
	"fmt"
	"runtime/debug"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestFromBuildInfo(t *testing.T) {
	for _, c := range []struct {
		name string
		bi   debug.BuildInfo
		want Info
		line string
	}{
		{
			name: "a checkout with changes",
			bi: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261203131000-4ed8459c1f2a+dirty"}, Settings: []debug.BuildSetting{
				{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "4ed8459c1f2a"}, {Key: "vcs.time", Value: "2026-12-03T13:10:00Z"}, {Key: "vcs.modified", Value: "true"},
			}},
			want: Info{Version: "v0.0.0-20261203131000-4ed8459c1f2a+dirty", Revision: "4ed8459c1f2a", Time: "2026-12-03T13:10:00Z", Modified: true, GoVersion: "go1.26.8"},
			line: "v0.0.0-20261203131000-4ed8459c1f2a+dirty (revision 4ed8459c1f2a, 2026-12-03T13:10:00Z, modified) go1.26.8",
		},
		{
			name: "a tag, clean",
			bi: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"},
			}},
			want: Info{Version: "v1.2.0", Revision: "abc", GoVersion: "go1.26.8"},
			line: "v1.2.0 (revision abc) go1.26.8",
		},
		{
			name: "no VCS stamp",
			bi:   debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: ""}},
			want: Info{Version: "(devel)", GoVersion: "go1.26.8"},
			line: "(devel) go1.26.8",
		},
	} {
		got := fromBuildInfo(&c.bi)
		if got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
		if got.String() != c.line {
			t.Errorf("%s: String() = %q, want %q", c.name, got.String(), c.line)
		}
	}
}

func TestCollector(t *testing.T) {
	i := Info{Version: "v1.2.0", Revision: "abc", GoVersion: "go1.26.8", Modified: true}
	reg := prometheus.NewRegistry()
	reg.MustRegister(i.Collector())
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) != 1 || fams[0].GetName() != "renderbox_build_info" || len(fams[0].GetMetric()) != 1 {
		t.Fatalf("got %v, want one renderbox_build_info series", fams)
	}
	m := fams[0].GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	want := map[string]string{"version": "v1.2.0", "revision": "abc", "goversion": "go1.26.8"}
	if fmt.Sprint(labels) != fmt.Sprint(want) || m.GetGauge().GetValue() != 1 {
		t.Errorf("got labels %v and value %g, want %v and 1", labels, m.GetGauge().GetValue(), want)
	}
}
