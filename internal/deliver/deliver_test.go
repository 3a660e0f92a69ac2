package deliver

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/egress"
)

func TestCheck(t *testing.T) {
	buckets, err := ParseBuckets(" reports-*, acme-out ,")
	if err != nil {
		t.Fatal(err)
	}
	p := Policy{Buckets: buckets}
	loop := Policy{Egress: egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}
	for _, c := range []struct {
		name string
		p    Policy
		s    Spec
		want error // nil, ErrInvalid or ErrRefused
	}{
		{"public URL", p, Spec{PutURLs: map[string]string{"output.pdf": "https://bucket.example.com/o.pdf?X-Amz-Signature=abc"}}, nil},
		{"allowed bucket by pattern", p, Spec{S3: &S3Dest{Bucket: "reports-2026", Prefix: "jobs/"}}, nil},
		{"allowed bucket by name", p, Spec{S3: &S3Dest{Bucket: "acme-out"}}, nil},
		{"loopback allowed by the operator", loop, Spec{PutURLs: map[string]string{"a.pdf": "http://127.0.0.1:9000/a"}}, nil},
		{"private address", p, Spec{PutURLs: map[string]string{"a.pdf": "https://10.0.0.5/a?sig=s3cr3t"}}, ErrRefused},
		{"loopback", p, Spec{PutURLs: map[string]string{"a.pdf": "http://127.0.0.1:9000/a"}}, ErrRefused},
		{"metadata address", p, Spec{PutURLs: map[string]string{"a.pdf": "http://169.254.169.254/latest"}}, ErrRefused},
		{"not http", p, Spec{PutURLs: map[string]string{"a.pdf": "ftp://example.com/a"}}, ErrRefused},
		{"bucket not allowed", p, Spec{S3: &S3Dest{Bucket: "payroll"}}, ErrRefused},
		{"no bucket allowed", Policy{}, Spec{S3: &S3Dest{Bucket: "acme-out"}}, ErrRefused},
		{"both", p, Spec{PutURLs: map[string]string{"a": "https://example.com/"}, S3: &S3Dest{Bucket: "acme-out"}}, ErrInvalid},
		{"neither", p, Spec{}, ErrInvalid},
		{"credentials", p, Spec{PutURLs: map[string]string{"a.pdf": "https://u:p@example.com/a"}}, ErrInvalid},
		{"a path as the output name", p, Spec{PutURLs: map[string]string{"../a.pdf": "https://example.com/a"}}, ErrInvalid},
		{"bad bucket name", p, Spec{S3: &S3Dest{Bucket: "Reports_X"}}, ErrInvalid},
		{"prefix climbing out", p, Spec{S3: &S3Dest{Bucket: "acme-out", Prefix: "a/../../b"}}, ErrInvalid},
		{"absolute prefix", p, Spec{S3: &S3Dest{Bucket: "acme-out", Prefix: "/a"}}, ErrInvalid},
	} {
		err := c.p.Check(c.s)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: the refusal quotes the URL's query: %v", c.name, err)
		}
	}
}

func TestParseBucketsRefusesNonPatterns(t *testing.T) {
	for _, s := range []string{"a/b", "[ab", `a\b`} {
		if _, err := ParseBuckets(s); err == nil {
			t.Errorf("ParseBuckets(%q): got no error", s)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://s3.example.com/b/o.pdf?X-Amz-Signature=abc&X-Amz-Credential=k": "https://s3.example.com/b/o.pdf",
		"https://u:p@example.com:8443/a#frag":                                   "https://example.com:8443/a",
		"%zz":                                                                   "(not a URL)",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
