package sandbox

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

// RunscModule and PinnedRunsc name the runsc build renderbox is tested with.
// MinRunscDate is the oldest gVisor snapshot (YYYYMMDD) accepted.
const (
	RunscModule  = "gvisor.dev/gvisor"
	PinnedRunsc  = "v0.0.0-20260905035102-160fafc42237"
	MinRunscDate = "20260905"
)

// InstallHint is the command that installs the pinned runsc; error messages
// name it.
const InstallHint = "CGO_ENABLED=0 GOBIN=/usr/local/bin go install gvisor.dev/gvisor/runsc@" + PinnedRunsc +
	" (or: make setup)"

// ErrRunscMissing and ErrRunscTooOld are start-up refusals.
var (
	ErrRunscMissing = errors.New("runsc not found")
	ErrRunscTooOld  = errors.New("runsc is older than the pinned minimum")
	ErrRunscDynamic = errors.New("runsc was built with cgo")
)

// Locate finds runsc: path if given, else $PATH, else /usr/local/bin/runsc.
// It returns an absolute path.
func Locate(path string) (string, error) {
	if path == "" {
		if p, err := exec.LookPath("runsc"); err == nil {
			path = p
		} else {
			path = "/usr/local/bin/runsc"
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%w at %s (install it with: %s)", ErrRunscMissing, path, InstallHint)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w: %s is not an executable file (install it with: %s)", ErrRunscMissing, path, InstallHint)
	}
	if !strings.HasPrefix(path, "/") {
		wd, _ := os.Getwd()
		path = wd + "/" + path
	}
	return path, nil
}

// RunscVersion is what CheckVersion learned about a runsc binary.
type RunscVersion struct {
	// Date is the gVisor snapshot date, YYYYMMDD.
	Date string
	// Raw is the version string it came from.
	Raw string
}

var (
	releaseRe = regexp.MustCompile(`release-(\d{8})\.\d+`)
	pseudoRe  = regexp.MustCompile(`^v0\.0\.0-(\d{8})\d{6}-[0-9a-f]{12}$`)
)

// CheckVersion reads the version of the runsc at path and refuses one older
// than MinRunscDate. A release build says "runsc version release-YYYYMMDD.N";
// a build from the Go module proxy says VERSION_MISSING, so its module
// version is read from the binary's build information instead. A cgo build
// is refused: inside its own chroot it cannot re-exec itself.
func CheckVersion(ctx context.Context, path string) (RunscVersion, error) {
	var v RunscVersion
	if bi, err := buildinfo.ReadFile(path); err == nil {
		for _, s := range bi.Settings {
			if s.Key == "CGO_ENABLED" && s.Value == "1" {
				return v, fmt.Errorf("%w at %s: it fails inside its chroot; rebuild it with: %s", ErrRunscDynamic, path, InstallHint)
			}
		}
		if bi.Main.Path == RunscModule {
			if m := pseudoRe.FindStringSubmatch(bi.Main.Version); m != nil {
				v = RunscVersion{Date: m[1], Raw: bi.Main.Version}
			}
		}
	}
	if v.Date == "" {
		out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
		if err != nil {
			return v, fmt.Errorf("%w: running %s --version: %v: %s (install it with: %s)", ErrRunscMissing, path, err, out, InstallHint)
		}
		if m := releaseRe.FindStringSubmatch(string(out)); m != nil {
			v = RunscVersion{Date: m[1], Raw: "release-" + m[1]}
		} else {
			return v, fmt.Errorf("%w: cannot tell the version of %s (it says %q); install the pinned one with: %s",
				ErrRunscTooOld, path, strings.TrimSpace(string(out)), InstallHint)
		}
	}
	if v.Date < MinRunscDate {
		return v, fmt.Errorf("%w: %s is %s, need %s or newer; install it with: %s",
			ErrRunscTooOld, path, v.Raw, MinRunscDate, InstallHint)
	}
	return v, nil
}
