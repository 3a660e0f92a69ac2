//go:build !unit

package render_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/rootfs"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// Inside a sandbox, fontconfig reads one flattened fonts.conf (no conf.d,
// no template directory to parse) and answers every query the build
// recorded — full matches with every edited property, the generic
// families' fallback order, the font list — exactly as Debian's
// configuration answered it on the host before it was flattened.
func TestFontconfigInTheSandbox(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RootfsDir(t), rootfs.FontconfigRecordPath))
	if err != nil {
		t.Fatalf("the rootfs has no fontconfig record (rebuild it: make rootfs): %v", err)
	}
	var record []rootfs.FontconfigQuery
	if err := json.Unmarshal(b, &record); err != nil || len(record) < 10 {
		t.Fatalf("fontconfig record: %v (%d queries)", err, len(record))
	}
	var script strings.Builder
	script.WriteString("for p in /etc/fonts/conf.d /usr/share/fontconfig/conf.avail; do test -e $p && echo \"$p\"; done > /tmp/out/present.txt\n")
	for i, q := range record {
		quoted := make([]string, len(q.Argv))
		for j, a := range q.Argv {
			quoted[j] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		fmt.Fprintf(&script, "env -i PATH=/usr/bin:/bin HOME=/nonexistent LANG=C.UTF-8 %s >/tmp/out/answer-%d.txt 2>/tmp/out/stderr-%d.txt\n",
			strings.Join(quoted, " "), i, i)
	}
	files := shellFiles(t, testenv.Manager(t, sandbox.Config{}), script.String(), 2*len(record)+1)
	for name, data := range files {
		if strings.HasPrefix(name, "stderr-") && data != "" {
			t.Errorf("%s: %s", name, data)
		}
	}
	if p := strings.TrimSpace(files["present.txt"]); p != "" {
		t.Errorf("fontconfig's configuration is not flat in the sandbox: %s present", p)
	}
	for i, q := range record {
		answer, ok := files[fmt.Sprintf("answer-%d.txt", i)]
		if got := rootfs.FontconfigAnswer(q.Argv, []byte(answer)); !ok || got.SHA256 != q.SHA256 {
			t.Errorf("in the sandbox, %s answers %q (sha256 %.12s); want %q (%.12s), as on the host before flattening",
				strings.Join(q.Argv, " "), got.First, got.SHA256, q.First, q.SHA256)
		}
	}
	t.Logf("%d fontconfig queries answered as Debian's configuration answers them", len(record))
}
