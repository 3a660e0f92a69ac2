package worker

import (
	"errors"
	"flag"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/renderbox/renderbox/internal/egress"
	"github.com/renderbox/renderbox/internal/fetch"
)

// RemoteConfig turns on the host's broker for URL pages (html-pdf and
// html-png given a url): the worker fetches what such a page asks for
// under the egress policy, its sandbox having no network. The flags have
// the API's names (docs/security.md, "Fetching on the host").
type RemoteConfig struct {
	Enabled                            bool
	Allow, Deny, AllowHosts, DenyHosts string
	MaxRequests                        int
	MaxBytes, MaxResponseBytes         int64
}

// RemoteContentSetting names the setting, for a URL job on a worker
// without it.
const RemoteContentSetting = "-remote-content (RENDERBOX_REMOTE_CONTENT)"

// Bind registers the flags.
func (r *RemoteConfig) Bind(fs *flag.FlagSet) {
	fs.BoolVar(&r.Enabled, "remote-content", false, "fetch what URL pages ask for, on this host, under the egress policy (docs/security.md, \"Fetching on the host\")")
	fs.StringVar(&r.Allow, "remote-allow", "", "non-public ranges a URL page may reach, e.g. 10.0.0.0/8 (public addresses only by default)")
	fs.StringVar(&r.Deny, "remote-deny", "", "ranges a URL page may never reach, though public (wins over -remote-allow)")
	fs.StringVar(&r.AllowHosts, "remote-allow-hosts", "", "the only hosts a URL page is fetched from, e.g. *.example.com (any by default)")
	fs.StringVar(&r.DenyHosts, "remote-deny-hosts", "", "hosts a URL page is never fetched from (wins over -remote-allow-hosts)")
	fs.IntVar(&r.MaxRequests, "remote-max-requests", fetch.DefaultMaxRequests, "most requests one URL page makes")
	fs.Int64Var(&r.MaxBytes, "remote-max-bytes", fetch.DefaultMaxBytes, "most response bytes one URL page reads")
	fs.Int64Var(&r.MaxResponseBytes, "remote-max-response-bytes", 0, "most bytes of one response (default -remote-max-bytes)")
}

// Fetcher is the broker's fetcher, nil when the setting is off.
func (r RemoteConfig) Fetcher(reg prometheus.Registerer) (*fetch.Fetcher, error) {
	if !r.Enabled {
		return nil, nil
	}
	p, err := egress.ParsePolicy("remote-", r.Allow, r.Deny, r.AllowHosts, r.DenyHosts)
	if err != nil {
		return nil, err
	}
	if r.MaxRequests < 1 || r.MaxBytes < 1 || r.MaxResponseBytes < 0 {
		return nil, errors.New("-remote-max-requests and -remote-max-bytes must be at least 1, -remote-max-response-bytes at least 0")
	}
	var m *fetch.Metrics
	if reg != nil {
		m = fetch.NewMetrics(reg)
	}
	return fetch.New(&egress.Dialer{Policy: p}, fetch.Limits{MaxRequests: r.MaxRequests, MaxBytes: r.MaxBytes, MaxResponseBytes: r.MaxResponseBytes}, m), nil
}
