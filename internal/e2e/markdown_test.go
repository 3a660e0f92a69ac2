//go:build !unit

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	rb "github.com/renderbox/renderbox/client"
)

// A Markdown PDF made through the API and the worker has a real title:
// its first heading, or with none the job's output_name — which reaches
// the sandbox from the queued task — and never the page's address.
func TestMarkdownPDFTitleThroughTheAPI(t *testing.T) {
	s := newStack(t, stackOpts{})
	c := s.sdk(s.key("titles"))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, tc := range []struct{ doc, outputName, want string }{
		{"Minutes of the meeting, no heading.\n", "minutes-2026", "minutes-2026"},
		{"# Board meeting\n\nMinutes.\n", "minutes", "Board meeting"},
	} {
		j, err := c.Submit(ctx, rb.Request{Renderer: "markdown-pdf", OutputName: tc.outputName, Files: []rb.File{rb.FromBytes("notes.md", []byte(tc.doc))}})
		if err == nil {
			j, err = c.Wait(ctx, j.ID, nil)
		}
		if err != nil || j.State != "succeeded" {
			t.Fatalf("markdown-pdf %q: %+v %v", tc.outputName, j, err)
		}
		paths, err := c.DownloadAll(ctx, j, t.TempDir())
		if err != nil || len(paths) != 1 {
			t.Fatalf("download: %v %v", paths, err)
		}
		pdf, _ := os.ReadFile(paths[0])
		info := hostTool(t, "pdfinfo", pdf)
		if !strings.Contains(info, "Title:           "+tc.want+"\n") {
			t.Errorf("output_name %q, document %q: pdfinfo says\n%s\nwant the Title %q", tc.outputName, tc.doc, info, tc.want)
		}
	}
}
