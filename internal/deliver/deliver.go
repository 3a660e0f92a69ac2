// Package deliver puts a job's outputs where its client asked them to go:
// a presigned PUT URL per output, on any server the egress policy lets
// the server reach, or keys under a prefix of an S3 bucket the operator
// allows by pattern (docs/api.md, "Delivery to your storage"). This
// package is the destination policy and the uploads.
//
// A destination is chosen by the client, so an upload is a request the
// server makes on an untrusted party's behalf: it follows the same
// address policy as webhooks and fetched inputs (internal/egress), checked
// at intake for address literals and again at each dial. A presigned URL
// is a secret — its query string carries the signature — so only its
// scheme, host and path are ever shown (Redact).
package deliver

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/renderbox/renderbox/internal/egress"
)

var (
	// ErrInvalid marks a destination that is malformed.
	ErrInvalid = errors.New("invalid delivery destination")
	// ErrRefused marks a well-formed destination the operator does not
	// allow: a refused address or a bucket no pattern admits.
	ErrRefused = errors.New("delivery destination not allowed")
)

// Bounds on a destination, so that a job's record stays small.
const (
	MaxPutURLs    = 64
	MaxURLLength  = 4096
	MaxPrefixLen  = 512
	maxBucketName = 63
)

// Spec is where a job's outputs go: exactly one of PutURLs and S3.
type Spec struct {
	// PutURLs maps an output's name to a presigned PUT URL. Outputs not
	// named stay downloadable only; a name no output has fails delivery.
	PutURLs map[string]string `json:"put_urls,omitempty"`
	// S3 puts every output at Prefix + its name in Bucket.
	S3 *S3Dest `json:"s3,omitempty"`
}

// S3Dest is a bucket of the operator's S3-compatible store.
type S3Dest struct {
	Bucket string `json:"bucket"`
	Prefix string `json:"prefix,omitempty"`
}

// Policy decides which destinations a job may name.
type Policy struct {
	// Egress is the address policy every upload to a URL follows.
	Egress egress.Policy
	// Buckets are the patterns (path.Match: * and ?) a destination
	// bucket must match; none allows no bucket.
	Buckets []string
}

// ParseBuckets reads a comma-separated list of bucket patterns, as
// -deliver-buckets takes them (e.g. "reports-*,acme-out").
func ParseBuckets(s string) ([]string, error) {
	var ps []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if _, err := path.Match(f, ""); err != nil || strings.ContainsAny(f, "/[\\") {
			return nil, fmt.Errorf("-deliver-buckets: %q is not a bucket pattern (a name with * or ?, e.g. reports-*)", f)
		}
		ps = append(ps, f)
	}
	return ps, nil
}

// Check validates s at intake: one kind of destination, URLs the egress
// policy allows as far as can be told before dialing (scheme, host lists,
// address literals), a bucket a pattern admits. Errors wrap ErrInvalid or
// ErrRefused and never quote a URL's query.
func (p Policy) Check(s Spec) error {
	switch {
	case len(s.PutURLs) > 0 && s.S3 != nil:
		return fmt.Errorf("%w: give put_urls or s3, not both", ErrInvalid)
	case len(s.PutURLs) == 0 && s.S3 == nil:
		return fmt.Errorf("%w: give put_urls (an output name to a presigned PUT URL) or s3 ({\"bucket\": …, \"prefix\": …})", ErrInvalid)
	case len(s.PutURLs) > MaxPutURLs:
		return fmt.Errorf("%w: put_urls has %d entries, over %d", ErrInvalid, len(s.PutURLs), MaxPutURLs)
	}
	for name, raw := range s.PutURLs {
		if err := p.checkURL(name, raw); err != nil {
			return err
		}
	}
	if s.S3 != nil {
		return p.checkS3(*s.S3)
	}
	return nil
}

func (p Policy) checkURL(name, raw string) error {
	if name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
		return fmt.Errorf("%w: put_urls: %q is not an output name", ErrInvalid, name)
	}
	if len(raw) > MaxURLLength {
		return fmt.Errorf("%w: put_urls[%q] is longer than %d bytes", ErrInvalid, name, MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: put_urls[%q] is not a URL", ErrInvalid, name)
	}
	switch {
	case u.User != nil:
		return fmt.Errorf("%w: put_urls[%q] must not carry credentials; presign it instead", ErrInvalid, name)
	case u.Fragment != "":
		return fmt.Errorf("%w: put_urls[%q] must not have a #fragment", ErrInvalid, name)
	}
	if err := p.Egress.CheckURL(u); err != nil {
		return fmt.Errorf("%w: put_urls[%q] (%s): %v", ErrRefused, name, Redact(raw), err)
	}
	return nil
}

func (p Policy) checkS3(d S3Dest) error {
	if !validBucket(d.Bucket) {
		return fmt.Errorf("%w: s3.bucket %q is not a bucket name (3 to 63 of a-z 0-9 . -)", ErrInvalid, d.Bucket)
	}
	switch {
	case len(d.Prefix) > MaxPrefixLen:
		return fmt.Errorf("%w: s3.prefix is longer than %d bytes", ErrInvalid, MaxPrefixLen)
	case strings.HasPrefix(d.Prefix, "/") || strings.Contains("/"+d.Prefix+"/", "/../") || strings.ContainsAny(d.Prefix, "\\\x00"):
		return fmt.Errorf("%w: s3.prefix must be relative, without .. or \\", ErrInvalid)
	}
	for _, pat := range p.Buckets {
		if ok, _ := path.Match(pat, d.Bucket); ok {
			return nil
		}
	}
	if len(p.Buckets) == 0 {
		return fmt.Errorf("%w: this server delivers to no bucket (its operator allows some with -deliver-buckets)", ErrRefused)
	}
	return fmt.Errorf("%w: bucket %q matches none of the patterns this server allows", ErrRefused, d.Bucket)
}

func validBucket(b string) bool {
	if len(b) < 3 || len(b) > maxBucketName {
		return false
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// Redact is raw as it may be shown: scheme, host and path, without the
// query (a presigned URL's signature), credentials or fragment.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(not a URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
