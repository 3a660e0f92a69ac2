package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// chart is the chart's directory, from this module's.
const chart = "../renderbox"

// helm finds the pinned helm that scripts/setup.sh installs into
// bin/tools, or $HELM; missing, the test fails saying how to get it.
func helm(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	h, err := filepath.Abs("../../../bin/tools/helm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(h); err != nil {
		t.Fatalf("helm is missing at %s: run: make setup-tests (scripts/setup.sh --tests installs the pinned helm there), or set HELM", h)
	}
	return h
}

// template renders the chart with a values file ("" for the defaults).
func template(t *testing.T, values string) ([]byte, error) {
	t.Helper()
	args := []string{"template", "rb", chart, "--namespace", "renderbox"}
	if values != "" {
		args = append(args, "--values", values)
	}
	cmd := exec.Command(helm(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, &helmError{err: err, stderr: stderr.String()}
	}
	return out, nil
}

type helmError struct {
	err    error
	stderr string
}

func (e *helmError) Error() string { return "helm template: " + e.err.Error() + ": " + e.stderr }

func goodValues(t *testing.T) []string {
	files, err := filepath.Glob("testdata/good/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no value sets in testdata/good (%v)", err)
	}
	return append([]string{""}, files...)
}

func name(values string) string {
	if values == "" {
		return "defaults"
	}
	return strings.TrimSuffix(filepath.Base(values), ".yaml")
}

// TestChartLints runs helm lint --strict with each value set.
func TestChartLints(t *testing.T) {
	for _, v := range goodValues(t) {
		args := []string{"lint", "--strict", chart}
		if v != "" {
			args = append(args, "--values", v)
		}
		out, err := exec.Command(helm(t), args...).CombinedOutput()
		if err != nil {
			t.Errorf("%s: helm lint: %v\n%s", name(v), err, out)
		}
	}
}

// TestChartRendersValidManifests renders each value set and decodes every
// document strictly, then checks the chart's invariants.
func TestChartRendersValidManifests(t *testing.T) {
	for _, v := range goodValues(t) {
		t.Run(name(v), func(t *testing.T) {
			out, err := template(t, v)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := Decode(bytes.NewReader(out))
			if err != nil {
				t.Fatalf("decoding: %v", err)
			}
			if err := Check(objs); err != nil {
				t.Fatalf("invariants: %v", err)
			}
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.Obj.GetObjectKind().GroupVersionKind().Kind]++
			}
			for _, k := range []string{"Deployment", "DaemonSet", "Service", "PodDisruptionBudget"} {
				if kinds[k] != 1 {
					t.Errorf("rendered %d %s, want 1 (kinds: %v)", kinds[k], k, kinds)
				}
			}
		})
	}
}

// TestBrokenValuesFail renders each value set in testdata/broken, which
// breaks one promise, and wants the chart or the validator to refuse it
// with the message its first line names ("# want: …"): the validation
// can fail.
func TestBrokenValuesFail(t *testing.T) {
	files, err := filepath.Glob("testdata/broken/*.yaml")
	if err != nil || len(files) < 5 {
		t.Fatalf("want the broken value sets in testdata/broken, found %d (%v)", len(files), err)
	}
	for _, v := range files {
		t.Run(name(v), func(t *testing.T) {
			want := wantLine(t, v)
			out, err := template(t, v)
			if err == nil {
				var objs []Object
				if objs, err = Decode(bytes.NewReader(out)); err == nil {
					err = Check(objs)
				}
			}
			switch {
			case err == nil:
				t.Fatalf("rendered and validated; want a refusal saying %q", want)
			case !strings.Contains(err.Error(), want):
				t.Fatalf("refused with %v; want it to say %q", err, want)
			}
		})
	}
}

func wantLine(t *testing.T, path string) string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	if s.Scan() {
		if w, ok := strings.CutPrefix(s.Text(), "# want: "); ok {
			return w
		}
	}
	t.Fatalf("%s: the first line must be \"# want: <what the refusal says>\"", path)
	return ""
}
