package blobs

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Download modes of -blobs-downloads.
const (
	// Redirect answers a download with a 302 to a presigned URL of the
	// object: the bytes go from the store to the client.
	Redirect = "redirect"
	// Proxy streams the object through the API, as with Redis.
	Proxy = "proxy"
)

// Config is the -blobs* settings, the API's and the worker's alike: one
// URL names the store both use. Credentials never come from a flag,
// whose value every user of the host sees in ps: they come from the
// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and optionally
// AWS_SESSION_TOKEN) or from a file in the AWS shared-credentials format.
type Config struct {
	// URL is -blobs (env RENDERBOX_BLOBS): "" or "redis" keeps documents
	// in the queue's Redis (the default); s3://bucket[/prefix]?endpoint=
	// host:port&region=…&secure=false names an S3-compatible store.
	URL string
	// CredentialsFile is -blobs-credentials-file (env
	// RENDERBOX_BLOBS_CREDENTIALS_FILE): an AWS shared-credentials file
	// (profile from AWS_PROFILE, default "default"). Default: the
	// environment's AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
	CredentialsFile string
	// Downloads is -blobs-downloads: redirect (default) or proxy, how the
	// API answers GET …/outputs/{name} from an object store.
	Downloads string
	// PresignExpiry is -blobs-presign-expiry: how long a redirect's URL
	// is valid. Default 5m.
	PresignExpiry time.Duration
}

// Bind registers the -blobs* flags. api says whether the download flags,
// which only the API reads, are registered too.
func (c *Config) Bind(fs *flag.FlagSet, api bool) {
	fs.StringVar(&c.URL, "blobs", "", `where documents live: "redis" (the default: the queue's Redis) or s3://bucket[/prefix]?endpoint=host:port&region=…&secure=false (an S3-compatible store; credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or -blobs-credentials-file); the API and the workers must name the same store`)
	fs.StringVar(&c.CredentialsFile, "blobs-credentials-file", "", "AWS shared-credentials file for -blobs s3://… (profile AWS_PROFILE or default; default: the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY variables)")
	if api {
		fs.StringVar(&c.Downloads, "blobs-downloads", Redirect, "with -blobs s3://…: answer an output's download with a 302 to a presigned URL (redirect) or stream it through the API (proxy)")
		fs.DurationVar(&c.PresignExpiry, "blobs-presign-expiry", 5*time.Minute, "with -blobs-downloads redirect: how long a presigned URL is valid")
	}
}

// S3URL is a parsed s3:// URL.
type S3URL struct {
	Bucket, Prefix string
	// Endpoint is host[:port]; default s3.amazonaws.com.
	Endpoint string
	Region   string
	// Secure is HTTPS to the endpoint; default true.
	Secure bool
	// PathStyle addresses the bucket in the path, not the host name; the
	// default for any endpoint but AWS's.
	PathStyle bool
}

// IsRedis reports whether the documents stay in Redis.
func (c Config) IsRedis() bool { return c.URL == "" || c.URL == "redis" }

// Parse reads an s3:// URL.
func Parse(raw string) (S3URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return S3URL{}, fmt.Errorf("-blobs: %w", err)
	}
	if u.Scheme != "s3" || u.Host == "" {
		return S3URL{}, fmt.Errorf(`-blobs %q: want "redis" or s3://bucket[/prefix]?endpoint=host:port&region=…`, raw)
	}
	if u.User != nil {
		return S3URL{}, errors.New("-blobs: credentials in the URL are refused; set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or -blobs-credentials-file")
	}
	s := S3URL{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/"), Secure: true}
	if s.Prefix != "" {
		s.Prefix += "/"
	}
	q := u.Query()
	for k := range q {
		switch k {
		case "endpoint", "region", "secure", "path_style":
		default:
			return S3URL{}, fmt.Errorf("-blobs: unknown parameter %q (endpoint, region, secure, path_style)", k)
		}
	}
	s.Endpoint, s.Region = q.Get("endpoint"), q.Get("region")
	if s.Endpoint == "" {
		s.Endpoint = "s3.amazonaws.com"
	}
	s.PathStyle = s.Endpoint != "s3.amazonaws.com"
	for name, dst := range map[string]*bool{"secure": &s.Secure, "path_style": &s.PathStyle} {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return S3URL{}, fmt.Errorf("-blobs: %s=%q: want true or false", name, v)
			}
			*dst = b
		}
	}
	return s, nil
}

// Validate names the bad setting and what it must be.
func (c Config) Validate() error {
	if !c.IsRedis() {
		if _, err := Parse(c.URL); err != nil {
			return err
		}
	}
	switch c.Downloads {
	case "", Redirect, Proxy:
	default:
		return fmt.Errorf("-blobs-downloads %q: want redirect or proxy", c.Downloads)
	}
	if c.PresignExpiry < 0 || c.PresignExpiry > 7*24*time.Hour {
		return fmt.Errorf("-blobs-presign-expiry %s: want at most 168h (S3's bound)", c.PresignExpiry)
	}
	return nil
}

// Store returns the object store c names, or nil when documents stay in
// Redis (the queue's default).
func (c Config) Store() (*S3, error) {
	if c.IsRedis() {
		return nil, nil
	}
	return NewS3(c)
}
