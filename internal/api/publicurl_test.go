//go:build !unit

package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/api"
	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/jobstate"
)

// With -public-url every URL the API hands out is absolute under it:
// Location, each output's url and outputs_zip_url, in get and list alike.
// Without it they stay relative whatever Host the request names (k.call
// sends attacker.example): the Host header is the client's to write.
func TestPublicURL(t *testing.T) {
	for _, tc := range []struct{ public, want string }{
		{"https://render.example.com/prefix", "https://render.example.com/prefix"},
		{"", ""},
	} {
		k := newKeyedWith(t, func(s *api.Server) { s.PublicURL = tc.public })
		a := k.call("POST", "/v1/jobs", "application/json", svgJob)
		var j struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(a.body, &j); a.status != 202 || err != nil {
			t.Fatalf("submitting: %d %s", a.status, a.body)
		}
		if got, want := a.header.Get("Location"), tc.want+"/v1/jobs/"+j.ID; got != want {
			t.Errorf("public URL %q: Location %q, want %q", tc.public, got, want)
		}
		if _, err := k.ledger.Finish(context.Background(), j.ID, ledger.FinishOptions{State: jobstate.Succeeded, At: time.Now(),
			Outputs: []ledger.Output{{Name: "page 1.png", Size: 3, SHA256: strings.Repeat("0", 64), MediaType: "image/png"}}}); err != nil {
			t.Fatal(err)
		}
		type view struct {
			Outputs []struct {
				URL string `json:"url"`
			} `json:"outputs"`
			OutputsZipURL string `json:"outputs_zip_url"`
		}
		var got view
		if a := k.call("GET", "/v1/jobs/"+j.ID, "", ""); json.Unmarshal(a.body, &got) != nil || len(got.Outputs) != 1 {
			t.Fatalf("GET the job: %s", a.body)
		}
		var list struct {
			Jobs []view `json:"jobs"`
		}
		if a := k.call("GET", "/v1/jobs?state=succeeded", "", ""); json.Unmarshal(a.body, &list) != nil || len(list.Jobs) != 1 {
			t.Fatalf("GET /v1/jobs: %s", a.body)
		}
		for where, v := range map[string]view{"get": got, "list": list.Jobs[0]} {
			if want := tc.want + "/v1/jobs/" + j.ID + "/outputs/page%201.png"; v.Outputs[0].URL != want {
				t.Errorf("public URL %q, %s: output url %q, want %q", tc.public, where, v.Outputs[0].URL, want)
			}
			if want := tc.want + "/v1/jobs/" + j.ID + "/outputs.zip"; v.OutputsZipURL != want {
				t.Errorf("public URL %q, %s: outputs_zip_url %q, want %q", tc.public, where, v.OutputsZipURL, want)
			}
		}
	}
}
