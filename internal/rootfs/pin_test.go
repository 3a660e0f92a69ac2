package rootfs

import (
	"os"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/sandbox"
)

// The EROFS reader that checks images is the Sentry's own: go.mod pins
// gVisor's module at the runsc renderbox runs.
func TestImageReaderIsRunscs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	want := sandbox.RunscModule + " " + sandbox.PinnedRunsc
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == sandbox.RunscModule {
			if got := f[0] + " " + f[1]; got != want {
				t.Errorf("go.mod requires %s, runsc is pinned at %s: make them one version (go get %s@%s)", got, want, f[0], sandbox.PinnedRunsc)
			}
			return
		}
	}
	t.Errorf("go.mod does not require %s", sandbox.RunscModule)
}
