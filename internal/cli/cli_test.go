package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// -version prints the build, as api -version and worker -version do, and
// opens nothing: no server or key is needed.
func TestVersion(t *testing.T) {
	t.Setenv("RENDERBOX_SERVER", "")
	t.Setenv("RENDERBOX_KEY", "")
	t.Setenv("RENDERBOX_CONFIG", "/nonexistent")
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"-version"}, &out, &errb); err != nil {
		t.Fatalf("renderbox -version: %v %s", err, errb.String())
	}
	if !strings.HasPrefix(out.String(), "renderbox ") || !strings.Contains(out.String(), "go1.") {
		t.Errorf("renderbox -version printed %q, want renderbox <version> … <Go release>", out.String())
	}
	if err := run(context.Background(), []string{"-version", "now"}, &out, &errb); !errors.Is(err, errUsage) {
		t.Errorf("renderbox -version now: %v, want the usage", err)
	}
}
