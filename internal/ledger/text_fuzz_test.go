//go:build !unit

package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/jobstate"
)

// FuzzStoredText: free text from a sandbox or a webhook receiver (a
// failed job's message, an attempt's error) is recorded by both backends
// and comes back the same from both: as it was when it is UTF-8 without
// NUL, else with U+FFFD for what PostgreSQL's text cannot hold. Never an
// error, which would leave a job unended.
func FuzzStoredText(f *testing.F) {
	for _, s := range []string{"", "render failed: exit 1", "nul\x00byte", "bad \xff utf-8", "cut \xe2\x82", "é\u2028\t\r\n", `{"json":"\u0000"}`} {
		f.Add(s)
	}
	type side struct {
		name  string
		s     ledger.Store
		owner string
	}
	var sides []side
	for _, b := range backends {
		s := openStore(f, b.fresh(f))
		_, k := newKey(f, s, "fuzz")
		sides = append(sides, side{b.name, s, k.ID})
	}
	f.Fuzz(func(t *testing.T, text string) {
		ctx := context.Background()
		var got []string
		for _, sd := range sides {
			j := newJob(t, sd.s, ledger.Job{Owner: sd.owner, CallbackURL: "https://hooks.example.com/"})
			fin := ledger.FinishOptions{State: jobstate.Failed, ErrorCode: "render_failed", ErrorMessage: text}
			if ok, err := sd.s.Finish(ctx, j.ID, fin); !ok || err != nil {
				t.Fatalf("%s: Finish(%q): %v, %v", sd.name, text, ok, err)
			}
			// The webhook is unclaimed: its attempt count is still 0.
			a := ledger.WebhookAttempt{Attempt: 0, Error: text, RetryAt: time.Now().Add(time.Hour)}
			if ok, err := sd.s.RecordWebhook(ctx, j.ID, a); !ok || err != nil {
				t.Fatalf("%s: RecordWebhook(%q): %v, %v", sd.name, text, ok, err)
			}
			job, err := sd.s.GetJob(ctx, sd.owner, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			w, err := sd.s.GetWebhook(ctx, sd.owner, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			if job.ErrorMessage != w.LastError {
				t.Errorf("%s: the job's message %q and the webhook's error %q differ", sd.name, job.ErrorMessage, w.LastError)
			}
			got = append(got, job.ErrorMessage)
		}
		clean := utf8.ValidString(text) && !strings.Contains(text, "\x00")
		for i, g := range got {
			switch {
			case !utf8.ValidString(g) || strings.Contains(g, "\x00"):
				t.Errorf("%s stored %q for %q: want UTF-8 without NUL", sides[i].name, g, text)
			case clean && g != text:
				t.Errorf("%s stored %q for %q: want it as it was", sides[i].name, g, text)
			case g != got[0]:
				t.Errorf("%s stored %q, %s %q, for %q: want the same", sides[i].name, g, sides[0].name, got[0], text)
			}
		}
	})
}
