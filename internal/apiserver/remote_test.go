package apiserver

import (
	"strings"
	"testing"
	"time"
)

// The download_from settings are read into the API's policy and bounds,
// and a wrong one is refused naming its flag.
func TestRemoteSettings(t *testing.T) {
	var c Config
	fs, _ := serveFlags(&c)
	if err := fs.Parse([]string{"-remote-content", "-remote-allow", "10.0.0.0/8", "-remote-deny-hosts", "*.internal.example", "-remote-max-requests", "7"}); err != nil {
		t.Fatal(err)
	}
	r, err := c.remote()
	if err != nil {
		t.Fatal(err)
	}
	if !r.Enabled || len(r.Policy.Allow) != 1 || r.Policy.DenyHosts[0] != "*.internal.example" || r.Limits.MaxRequests != 7 ||
		r.Limits.MaxBytes != 50<<20 || r.Timeout != time.Minute {
		t.Errorf("remote settings %+v", r)
	}
	for flag, bad := range map[string]string{"-remote-allow": "10.0.0.0/33", "-remote-deny": "nope", "-remote-allow-hosts": "a/b",
		"-remote-deny-hosts": "*", "-remote-max-requests": "0", "-remote-timeout": "10ms", "-remote-max-per-key": "0"} {
		var c Config
		fs, _ := serveFlags(&c)
		if err := fs.Parse([]string{flag, bad}); err != nil {
			t.Fatal(err)
		}
		if err := c.validate(); err == nil || !strings.Contains(err.Error(), "-remote-") {
			t.Errorf("%s %s: %v, want refused naming the setting", flag, bad, err)
		}
	}
}
