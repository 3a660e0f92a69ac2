package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// settingsDoc is the table of every flag's variable, which
// TestSettingsAreDocumented (internal/apiserver, cmd/worker) keeps equal
// to the binaries' flags.
const settingsDoc = "../../../docs/settings.md"

// unflagged are variables the binaries read that have no flag, so no row
// of the table (docs/settings.md says so above it), and what else a
// container may set.
var unflagged = map[string]bool{
	"RENDERBOX_REDIS_PASSWORD": true,
	"RENDERBOX_REDIS_URL":      true,
	"TMPDIR":                   true, // the worker's spill files (safe-pdf)
	// An object store's keys (-blobs s3://…), read by its client.
	"AWS_ACCESS_KEY_ID":     true,
	"AWS_SECRET_ACCESS_KEY": true,
}

var variable = regexp.MustCompile(`RENDERBOX_[A-Z0-9_]+`)

// Settings reads, from docs/settings.md, the variables each program
// ("api", "worker") reads.
func Settings(path string) (map[string]map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]bool{"api": {}, "worker": {}}
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 {
			continue
		}
		name := variable.FindString(cells[3])
		if name == "" {
			continue
		}
		for _, prog := range strings.Split(cells[1], ",") {
			if set, ok := out[strings.TrimSpace(prog)]; ok {
				set[name] = true
			}
		}
	}
	if len(out["api"]) < 20 || len(out["worker"]) < 20 {
		return nil, fmt.Errorf("%s: read %d of the API's variables and %d of the worker's; is the table where it was?", path, len(out["api"]), len(out["worker"]))
	}
	return out, nil
}

// checkSettings fails on a variable the container sets that its program
// does not read: a misspelt or invented setting would be ignored.
func checkSettings(src, prog string, cs []corev1.Container, known map[string]bool, fail func(string, ...any)) {
	for _, c := range cs {
		for _, e := range c.Env {
			if !known[e.Name] && !unflagged[e.Name] && !strings.HasPrefix(e.Name, "OTEL_") {
				fail("%s: container %s sets %s, which %s does not read (docs/settings.md)", src, c.Name, e.Name, prog)
			}
		}
	}
}
