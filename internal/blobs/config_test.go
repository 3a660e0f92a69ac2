package blobs

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		url  string
		want S3URL
		err  string
	}{
		{url: "s3://b/p/q?endpoint=127.0.0.1:9000&secure=false&region=eu-1", want: S3URL{Bucket: "b", Prefix: "p/q/", Endpoint: "127.0.0.1:9000", Region: "eu-1", PathStyle: true}},
		{url: "s3://b", want: S3URL{Bucket: "b", Endpoint: "s3.amazonaws.com", Secure: true}},
		{url: "s3://b/?endpoint=s3.example.com&path_style=false", want: S3URL{Bucket: "b", Endpoint: "s3.example.com", Secure: true}},
		{url: "s3://key:secret@b/p", err: "credentials in the URL are refused"},
		{url: "http://b/p", err: "want \"redis\" or s3://"},
		{url: "s3://b?secure=maybe", err: "secure=\"maybe\""},
		{url: "s3://b?acl=public", err: "unknown parameter \"acl\""},
	} {
		got, err := Parse(c.url)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse(%q): %v, want an error with %q", c.url, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", c.url, got, err, c.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg Config
		err string
	}{
		{cfg: Config{}},
		{cfg: Config{URL: "redis"}},
		{cfg: Config{URL: "s3://b?endpoint=h:1", Downloads: Proxy}},
		{cfg: Config{URL: "s3://b", Downloads: "stream"}, err: "-blobs-downloads"},
		{cfg: Config{URL: "s3://b", PresignExpiry: 8 * 24 * time.Hour}, err: "-blobs-presign-expiry"},
		{cfg: Config{URL: "redis://x"}, err: "-blobs"},
	} {
		err := c.cfg.Validate()
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.err)
		}
	}
}

// Keys never come from the URL or a flag: with none in the environment
// NewS3 refuses, naming where they go.
func TestNewS3WantsCredentials(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_ACCESS_KEY", "")
	t.Setenv("AWS_SECRET_KEY", "")
	_, err := NewS3(Config{URL: "s3://b?endpoint=127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Errorf("NewS3 without keys: %v, want a refusal naming AWS_ACCESS_KEY_ID", err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "a")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "b")
	if _, err := NewS3(Config{URL: "s3://b?endpoint=127.0.0.1:1"}); err != nil {
		t.Errorf("NewS3 with keys in the environment: %v", err)
	}
}
