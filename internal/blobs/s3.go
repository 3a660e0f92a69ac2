package blobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/lifecycle"
)

// S3 keeps blobs as objects of an S3-compatible store, under the URL's
// prefix, through minio-go (a maintained client: it signs, retries and
// streams). Objects do not expire by themselves within a time to live
// finer than the lifecycle rules' days, so the API's janitor deletes
// those past the retention (Sweeper), and ExpireAfter sets a rule as the
// backstop where the store has rules.
type S3 struct {
	core   minio.Core
	bucket string
	prefix string
}

// NewS3 returns the store c.URL names, with the credentials of
// c.CredentialsFile or else the environment. It does not reach the store:
// Ping does.
func NewS3(c Config) (*S3, error) {
	u, err := Parse(c.URL)
	if err != nil {
		return nil, err
	}
	creds := credentials.NewEnvAWS()
	from := "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
	if c.CredentialsFile != "" {
		if _, err := os.Stat(c.CredentialsFile); err != nil {
			return nil, fmt.Errorf("-blobs-credentials-file: %w", err)
		}
		creds = credentials.NewFileAWSCredentials(c.CredentialsFile, os.Getenv("AWS_PROFILE"))
		from = "-blobs-credentials-file " + c.CredentialsFile
	}
	// nil: the default context; the environment and a file need no HTTP.
	if v, err := creds.GetWithContext(nil); err != nil || v.AccessKeyID == "" || v.SecretAccessKey == "" {
		return nil, fmt.Errorf("-blobs %s: no credentials in %s (set them, or give an AWS shared-credentials file with -blobs-credentials-file)", u.Bucket, from)
	}
	return newS3(u, creds)
}

// NewS3With is NewS3 with the given keys: for a test's own server.
func NewS3With(c Config, accessKey, secretKey string) (*S3, error) {
	u, err := Parse(c.URL)
	if err != nil {
		return nil, err
	}
	return newS3(u, credentials.NewStaticV4(accessKey, secretKey, ""))
}

func newS3(u S3URL, creds *credentials.Credentials) (*S3, error) {
	lookup := minio.BucketLookupDNS
	if u.PathStyle {
		lookup = minio.BucketLookupPath
	}
	// Few retries: the worker retries a job's reads and writes itself while
	// its lease holds, and the API answers 503 rather than hang.
	client, err := minio.New(u.Endpoint, &minio.Options{Creds: creds, Secure: u.Secure, Region: u.Region, BucketLookup: lookup, MaxRetries: 2})
	if err != nil {
		return nil, fmt.Errorf("-blobs: %w", err)
	}
	return &S3{core: minio.Core{Client: client}, bucket: u.Bucket, prefix: u.Prefix}, nil
}

func (s *S3) object(key string) string { return s.prefix + key }

// Ping checks that the bucket exists and the credentials reach it.
func (s *S3) Ping(ctx context.Context) error {
	ok, err := s.core.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("the object store: %w", err)
	}
	if !ok {
		return fmt.Errorf("the object store has no bucket %q (create it)", s.bucket)
	}
	return nil
}

// expiresMeta records, on each object, when its retention ends (for an
// operator reading the bucket; the janitor goes by the write time).
const expiresMeta = "Renderbox-Expires"

// Put writes data as one object.
func (s *S3) Put(ctx context.Context, key string, data []byte, ttl time.Duration) error {
	_, err := s.core.Client.PutObject(ctx, s.bucket, s.object(key), bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{
		ContentType:  "application/octet-stream",
		UserMetadata: map[string]string{expiresMeta: time.Now().Add(ttl).UTC().Format(time.RFC3339)},
	})
	if err != nil {
		return fmt.Errorf("writing %s to the object store: %w", key, err)
	}
	return nil
}

// notFound reports whether err says the object does not exist.
func notFound(err error) bool {
	r := minio.ToErrorResponse(err)
	return r.StatusCode == http.StatusNotFound || r.Code == "NoSuchKey"
}

// Get reads one object whole.
func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := s.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	data := make([]byte, 0, b.Size())
	buf := bytes.NewBuffer(data)
	if _, err := io.Copy(buf, b); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Open stats the object; reads fetch it then, each run of reads in order
// one ranged GET pinned to the object's ETag.
func (s *S3) Open(ctx context.Context, key string) (Blob, error) {
	info, err := s.core.Client.StatObject(ctx, s.bucket, s.object(key), minio.StatObjectOptions{})
	if notFound(err) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s in the object store: %w", key, err)
	}
	return &s3Blob{ctx: ctx, s: s, key: key, size: info.Size, etag: info.ETag}, nil
}

// Delete deletes objects; S3 answers a missing one as deleted.
func (s *S3) Delete(ctx context.Context, keys ...string) error {
	var errs []error
	for _, k := range keys {
		if err := s.core.Client.RemoveObject(ctx, s.bucket, s.object(k), minio.RemoveObjectOptions{}); err != nil && !notFound(err) {
			errs = append(errs, fmt.Errorf("deleting %s from the object store: %w", k, err))
		}
	}
	return errors.Join(errs...)
}

// DeleteBefore deletes the objects under the prefix written before
// cutoff, and returns how many.
func (s *S3) DeleteBefore(ctx context.Context, cutoff time.Time) (int, error) {
	n := 0
	var errs []error
	for o := range s.core.Client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix, Recursive: true}) {
		if o.Err != nil {
			return n, fmt.Errorf("listing the object store: %w", o.Err)
		}
		if !o.LastModified.Before(cutoff) {
			continue
		}
		if err := s.core.Client.RemoveObject(ctx, s.bucket, o.Key, minio.RemoveObjectOptions{}); err != nil && !notFound(err) {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// PresignGet signs a GET of the object valid for expiry, the response's
// headers set as a direct download would set them.
func (s *S3) PresignGet(ctx context.Context, key string, expiry time.Duration, mediaType, disposition string) (*url.URL, error) {
	params := url.Values{}
	if mediaType != "" {
		params.Set("response-content-type", mediaType)
	}
	if disposition != "" {
		params.Set("response-content-disposition", disposition)
	}
	return s.core.Client.PresignedGetObject(ctx, s.bucket, s.object(key), expiry, params)
}

// lifecycleRuleID names the rule ExpireAfter keeps, one per prefix.
func (s *S3) lifecycleRuleID() string { return "renderbox-" + s.prefix }

// ExpireAfter sets the bucket's lifecycle rule for the prefix to expire
// objects after retention rounded up to whole days, plus one: rules count
// days, and the janitor deletes on time; the rule deletes what a janitor
// that is not running leaves. Other rules of the bucket stay. A store
// without lifecycle rules answers an error, which the caller logs.
func (s *S3) ExpireAfter(ctx context.Context, retention time.Duration) error {
	days := int((retention+24*time.Hour-1)/(24*time.Hour)) + 1
	cfg, err := s.core.Client.GetBucketLifecycle(ctx, s.bucket)
	if err != nil {
		if r := minio.ToErrorResponse(err); r.Code != "NoSuchLifecycleConfiguration" {
			return fmt.Errorf("reading the bucket's lifecycle rules: %w", err)
		}
		cfg = lifecycle.NewConfiguration()
	}
	rules := cfg.Rules[:0]
	for _, r := range cfg.Rules {
		if r.ID != s.lifecycleRuleID() {
			rules = append(rules, r)
		}
	}
	cfg.Rules = append(rules, lifecycle.Rule{
		ID:         s.lifecycleRuleID(),
		Status:     "Enabled",
		RuleFilter: lifecycle.Filter{Prefix: s.prefix},
		Expiration: lifecycle.Expiration{Days: lifecycle.ExpirationDays(days)},
	})
	if err := s.core.Client.SetBucketLifecycle(ctx, s.bucket, cfg); err != nil {
		return fmt.Errorf("setting the bucket's lifecycle rule (%d days on %q): %w", days, s.prefix, err)
	}
	return nil
}

// s3Blob reads an object from an offset to its end in one GET, and opens
// another GET only after a seek elsewhere: a download in order is one
// request, a Range one request per range.
type s3Blob struct {
	ctx     context.Context
	s       *S3
	key     string
	size    int64
	etag    string
	off     int64
	body    io.ReadCloser
	bodyOff int64 // the offset body reads next
}

func (b *s3Blob) Size() int64 { return b.size }

func (b *s3Blob) Read(p []byte) (int, error) {
	if b.off >= b.size {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if b.body != nil && b.bodyOff != b.off {
		b.body.Close()
		b.body = nil
	}
	if b.body == nil {
		var opts minio.GetObjectOptions
		if err := opts.SetRange(b.off, b.size-1); err != nil {
			return 0, err
		}
		// An object written again meanwhile is not this blob.
		if err := opts.SetMatchETag(b.etag); err != nil {
			return 0, err
		}
		body, _, _, err := b.s.core.GetObject(b.ctx, b.s.bucket, b.s.object(b.key), opts)
		if err != nil {
			if notFound(err) {
				err = io.ErrUnexpectedEOF
			}
			return 0, fmt.Errorf("reading %s at %d from the object store: %w", b.key, b.off, err)
		}
		b.body, b.bodyOff = body, b.off
	}
	n, err := b.body.Read(p[:min(int64(len(p)), b.size-b.off)])
	b.off += int64(n)
	b.bodyOff += int64(n)
	if err == io.EOF && b.off < b.size {
		err = fmt.Errorf("reading %s: the object store ended at %d of %d bytes: %w", b.key, b.off, b.size, io.ErrUnexpectedEOF)
	} else if err == io.EOF {
		err = nil
	}
	return n, err
}

func (b *s3Blob) Seek(offset int64, whence int) (int64, error) {
	off, err := Seek(b.off, b.size, offset, whence)
	if err == nil {
		b.off = off
	}
	return off, err
}

func (b *s3Blob) Close() error {
	if b.body != nil {
		err := b.body.Close()
		b.body = nil
		return err
	}
	return nil
}

// String names the store for logs, without credentials.
func (s *S3) String() string {
	return "s3://" + s.bucket + "/" + s.prefix + " (" + s.core.Client.EndpointURL().Host + ", " + strconv.Quote(s.core.Client.EndpointURL().Scheme) + ")"
}
