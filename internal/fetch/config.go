package fetch

import (
	"errors"
	"flag"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/renderbox/renderbox/internal/egress"
)

// Config is the -remote-* settings, the API's (download_from) and the
// worker's (the broker of URL pages) alike: one set of flags, one policy,
// one meaning on both binaries (docs/settings.md, docs/security.md
// "Fetching on the host").
type Config struct {
	// Enabled turns fetching on. Default false. Env
	// RENDERBOX_REMOTE_CONTENT.
	Enabled bool
	// Allow and Deny list ranges (CIDRs, comma-separated) fetches may
	// reach although not public, and may not reach although public (deny
	// wins). Default none.
	Allow, Deny string
	// AllowHosts, when set, are the only hosts fetched from; DenyHosts are
	// never fetched from. Host patterns (example.com, *.example.com),
	// comma-separated. Default none.
	AllowHosts, DenyHosts string
	// MaxRequests, MaxBytes and MaxResponseBytes bound one job's fetches
	// (Limits). Defaults 500, 50 MiB and MaxBytes.
	MaxRequests                int
	MaxBytes, MaxResponseBytes int64
	// MaxPerKey bounds one key's fetches in flight at once: on the API its
	// submissions fetching download_from (429 past it; each fetches one
	// URL at a time), on a worker its URL pages' requests across the
	// worker's jobs (more wait, inside their job's timeout). Default 4.
	MaxPerKey int
}

// Setting names the setting that turns fetching on, for the refusal of a
// job that needs it on a server or worker without it.
const Setting = "-remote-content (RENDERBOX_REMOTE_CONTENT)"

// DefaultMaxPerKey is -remote-max-per-key's default.
const DefaultMaxPerKey = 4

// Bind registers the -remote-* flags. subject names, in their help, what
// fetches on this binary: "download_from" on the API, "a URL page" on a
// worker.
func (c *Config) Bind(fs *flag.FlagSet, subject string) {
	fs.BoolVar(&c.Enabled, "remote-content", false, "fetch for "+subject+", on this host, under the egress policy (docs/security.md, \"Fetching on the host\")")
	fs.StringVar(&c.Allow, "remote-allow", "", "non-public ranges "+subject+" may reach, e.g. 10.0.0.0/8 (public addresses only by default)")
	fs.StringVar(&c.Deny, "remote-deny", "", "ranges "+subject+" may never reach, though public (wins over -remote-allow)")
	fs.StringVar(&c.AllowHosts, "remote-allow-hosts", "", "the only hosts "+subject+" fetches from, e.g. files.example.com,*.cdn.example.com (any by default)")
	fs.StringVar(&c.DenyHosts, "remote-deny-hosts", "", "hosts "+subject+" never fetches from (wins over -remote-allow-hosts)")
	fs.IntVar(&c.MaxRequests, "remote-max-requests", DefaultMaxRequests, "most requests "+subject+" makes in one job")
	fs.Int64Var(&c.MaxBytes, "remote-max-bytes", DefaultMaxBytes, "most response bytes "+subject+" reads in one job")
	fs.Int64Var(&c.MaxResponseBytes, "remote-max-response-bytes", 0, "most bytes of one response (default -remote-max-bytes; download_from's each also at most its renderer's input limit)")
	fs.IntVar(&c.MaxPerKey, "remote-max-per-key", DefaultMaxPerKey, "most fetches one key has in flight at once: the API answers 429 past it, a worker's URL pages wait")
}

// Policy is the egress policy the lists make.
func (c Config) Policy() (egress.Policy, error) {
	return egress.ParsePolicy("remote-", c.Allow, c.Deny, c.AllowHosts, c.DenyHosts)
}

// Limits are one job's bounds.
func (c Config) Limits() Limits {
	return Limits{MaxRequests: c.MaxRequests, MaxBytes: c.MaxBytes, MaxResponseBytes: c.MaxResponseBytes}
}

// Validate names the bad setting and what it must be.
func (c Config) Validate() error {
	if _, err := c.Policy(); err != nil {
		return err
	}
	if c.MaxRequests < 1 || c.MaxBytes < 1 || c.MaxResponseBytes < 0 || c.MaxPerKey < 1 {
		return errors.New("-remote-max-requests, -remote-max-bytes and -remote-max-per-key must be at least 1, -remote-max-response-bytes at least 0")
	}
	return nil
}

// Fetcher is the fetcher the settings make, its counters registered with
// reg (when not nil); nil when fetching is off.
func (c Config) Fetcher(reg prometheus.Registerer) (*Fetcher, error) {
	if !c.Enabled {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	p, _ := c.Policy()
	var m *Metrics
	if reg != nil {
		m = NewMetrics(reg)
	}
	f := New(&egress.Dialer{Policy: p}, c.Limits(), m)
	f.perKey = NewKeySlots(c.MaxPerKey)
	return f, nil
}
