package deliver

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/renderbox/renderbox/internal/egress"
)

// Config is the -deliver* settings. URLs follow the -remote-* egress
// lists (fetch.Config), which the API and the workers share.
type Config struct {
	// Buckets is -deliver-buckets (both): the bucket patterns a job's s3
	// destination must match, comma-separated. Default none: no bucket.
	Buckets string
	// S3 is -deliver-s3 (workers): the store those buckets live in,
	// http[s]://host[:port][?region=…]. Credentials come from the
	// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), never a
	// flag. Default none.
	S3 string
}

// Bind registers the flags; worker says whether -deliver-s3, which only
// the workers read, is registered too.
func (c *Config) Bind(fs *flag.FlagSet, worker bool) {
	fs.StringVar(&c.Buckets, "deliver-buckets", "", "bucket patterns a job's deliver.s3 may name, e.g. reports-*,acme-out (default none; the workers need -deliver-s3)")
	if worker {
		fs.StringVar(&c.S3, "deliver-s3", "", "the S3-compatible store of -deliver-buckets, http[s]://host[:port]?region=… (credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
	}
}

// Policy is the intake policy of c's buckets and the egress policy p.
func (c Config) Policy(p egress.Policy) (Policy, error) {
	b, err := ParseBuckets(c.Buckets)
	return Policy{Egress: p, Buckets: b}, err
}

// Uploader is a worker's uploader: PUTs through a dialer of policy p,
// bucket uploads to -deliver-s3.
func (c Config) Uploader(p egress.Policy) (*Uploader, error) {
	b, err := ParseBuckets(c.Buckets)
	if err != nil {
		return nil, err
	}
	u := &Uploader{HTTP: egress.NewClient(&egress.Dialer{Policy: p}, egress.TransportOptions{HeaderTimeout: 30 * time.Second}), Buckets: b}
	if c.S3 == "" {
		if c.Buckets != "" {
			return nil, errors.New("-deliver-buckets needs -deliver-s3, the store the buckets are in")
		}
		return u, nil
	}
	s, err := url.Parse(c.S3)
	if err != nil || s.Scheme != "http" && s.Scheme != "https" || s.Host == "" || s.Path != "" && s.Path != "/" || s.User != nil {
		return nil, fmt.Errorf("-deliver-s3 %q: want http[s]://host[:port][?region=…], credentials in the environment", c.S3)
	}
	creds := credentials.NewEnvAWS()
	if v, err := creds.GetWithContext(nil); err != nil || v.AccessKeyID == "" {
		return nil, errors.New("-deliver-s3: no credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	u.S3, err = minio.New(s.Host, &minio.Options{Creds: creds, Secure: s.Scheme == "https", Region: s.Query().Get("region"), BucketLookup: minio.BucketLookupPath, MaxRetries: 1})
	if err != nil {
		return nil, fmt.Errorf("-deliver-s3: %w", err)
	}
	return u, nil
}
