package worker

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// asynq's "Retry exhausted" for a task whose job the handler ended (and
// so told asynq not to retry) is not a warning: nothing was retried. The
// same line for any other task, and asynq's other warnings, pass on.
func TestRetryExhaustedOnlyWhenRetried(t *testing.T) {
	var b bytes.Buffer
	h := &Handler{}
	a := asynqLogger{l: slog.New(slog.NewJSONHandler(&b, nil)), h: h}
	h.markEnded("job_ended")
	a.Warn("Retry exhausted for task id=job_ended")
	if b.Len() != 0 {
		t.Errorf("an ended job's task logged %s, want nothing at info or above", b.String())
	}
	a.Warn("Retry exhausted for task id=job_ended") // asked once only
	a.Warn("Retry exhausted for task id=job_other")
	a.Warn("Could not remove task id=x")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], `"level":"WARN","msg":"Retry exhausted for task id=job_ended"`) ||
		!strings.Contains(lines[1], "id=job_other") || !strings.Contains(lines[2], "Could not remove") {
		t.Errorf("logged %q, want the three other warnings", lines)
	}
	for i := range maxEnded + 1 {
		h.markEnded(fmt.Sprintf("job_%d", i))
	}
	if len(h.ended) > maxEnded {
		t.Errorf("ended holds %d tasks, want at most %d", len(h.ended), maxEnded)
	}
}
