// Package buildinfo says which build of renderbox is running: the main
// module's version, the VCS revision it was built from and the Go release
// that built it, as the Go toolchain stamped them into the binary. Every
// binary prints it for -version; the API serves it at GET /version, and
// both the API and the worker export it as renderbox_build_info, so an
// operator can tell which build answered a request or ran a job.
package buildinfo

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Info is one binary's build.
type Info struct {
	// Version is the main module's version: a tag, a pseudo-version
	// (v0.0.0-TIME-REVISION, "+dirty" for a modified tree), or "(devel)"
	// when the toolchain had none to stamp.
	Version string `json:"version"`
	// Revision is the VCS commit, "" when built outside a checkout (or
	// with -buildvcs=false).
	Revision string `json:"revision,omitempty"`
	// Time is the commit's time (RFC 3339), "" as Revision.
	Time string `json:"time,omitempty"`
	// Modified: the tree had changes not in Revision.
	Modified bool `json:"modified"`
	// GoVersion is the Go release that built the binary.
	GoVersion string `json:"go_version"`
}

// Read returns the running binary's build. A binary without build
// information (one built without module support) reads as "unknown"
// rather than failing: -version should never be what stops an operator.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown", GoVersion: "unknown"}
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) Info {
	i := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if i.Version == "" {
		i.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = s.Value
		case "vcs.time":
			i.Time = s.Value
		case "vcs.modified":
			i.Modified = s.Value == "true"
		}
	}
	return i
}

// String is the one line -version prints, e.g.
// "api v0.0.0-20261203131000-4ed8459c1f2a+dirty (revision 4ed8459…, 2026-12-03T13:10:00Z, modified) go1.26.8".
func (i Info) String() string {
	var vcs []string
	if i.Revision != "" {
		vcs = append(vcs, "revision "+i.Revision)
	}
	if i.Time != "" {
		vcs = append(vcs, i.Time)
	}
	if i.Modified {
		vcs = append(vcs, "modified")
	}
	s := i.Version
	if len(vcs) > 0 {
		s += " (" + strings.Join(vcs, ", ") + ")"
	}
	return s + " " + i.GoVersion
}

// Print writes the line -version prints for the binary called name.
func (i Info) Print(w io.Writer, name string) {
	fmt.Fprintf(w, "%s %s\n", name, i)
}

// Collector is renderbox_build_info: a gauge of 1 whose labels carry the
// build, the Prometheus convention for facts that are not numbers.
func (i Info) Collector() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "renderbox_build_info",
		Help: "The running build: main module version, VCS revision and Go release; always 1.",
		ConstLabels: prometheus.Labels{
			"version": i.Version, "revision": i.Revision, "goversion": i.GoVersion,
		},
	})
	g.Set(1)
	return g
}
