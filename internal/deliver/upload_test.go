//go:build !unit

package deliver_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/renderbox/renderbox/internal/deliver"
	"github.com/renderbox/renderbox/internal/egress"
	"github.com/renderbox/renderbox/internal/testenv"
)

func client(t *testing.T, s *testenv.S3Server) *minio.Client {
	t.Helper()
	c, err := minio.New(s.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// get reads an object back and checks its bytes and the recorded ETag.
func get(t *testing.T, c *minio.Client, bucket, key string, want []byte, rec deliver.Record) {
	t.Helper()
	obj, err := c.GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	got, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("reading %s/%s: %v", bucket, key, err)
	}
	st, _ := obj.Stat()
	sum := md5.Sum(want)
	switch {
	case !bytes.Equal(got, want):
		t.Errorf("%s: got %d bytes back, want the %d delivered", key, len(got), len(want))
	case rec.Status != deliver.Delivered || rec.Bytes != int64(len(want)):
		t.Errorf("%s: record %+v, want delivered with %d bytes", key, rec, len(want))
	case rec.ETag != st.ETag || rec.ETag != hex.EncodeToString(sum[:]):
		t.Errorf("%s: recorded ETag %q, the store's %q, the bytes' MD5 %x", key, rec.ETag, st.ETag, sum)
	}
}

func TestDeliverToPresignedURLAndAllowedBucket(t *testing.T) {
	s := testenv.StartS3(t)
	c := client(t, s)
	ctx := context.Background()
	pdf := []byte("%PDF-1.7 delivered " + strings.Repeat("x", 100<<10))
	png := []byte("\x89PNG page two")
	put, err := c.PresignedPutObject(ctx, s.Bucket, "client/out.pdf", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	outs := []deliver.Output{{Name: "out.pdf", MediaType: "application/pdf", Data: pdf}, {Name: "page-2.png", MediaType: "image/png", Data: png}}

	spec := deliver.Spec{PutURLs: map[string]string{"out.pdf": put.String()}}
	if err := (deliver.Policy{Egress: loopback}).Check(spec); err != nil {
		t.Fatalf("the operator allows loopback: %v", err)
	}
	recs, err := uploader(loopback, nil).Deliver(ctx, spec, outs)
	if err != nil || len(recs) != 1 {
		t.Fatalf("presigned PUT: got %+v, %v; want one delivery", recs, err)
	}
	get(t, c, s.Bucket, "client/out.pdf", pdf, recs[0])
	if want := "http://" + s.Endpoint + "/" + s.Bucket + "/client/out.pdf"; recs[0].Destination != want || recs[0].Attempts != 1 {
		t.Errorf("record %+v, want destination %s (no query) after 1 attempt", recs[0], want)
	}

	buckets, _ := deliver.ParseBuckets("renderbox-*")
	spec = deliver.Spec{S3: &deliver.S3Dest{Bucket: s.Bucket, Prefix: "acme/job-1/"}}
	if err := (deliver.Policy{Buckets: buckets}).Check(spec); err != nil {
		t.Fatalf("bucket %s against renderbox-*: %v", s.Bucket, err)
	}
	up := uploader(egress.Policy{}, c)
	up.Buckets = buckets
	recs, err = up.Deliver(ctx, spec, outs)
	if err != nil || len(recs) != 2 {
		t.Fatalf("bucket: got %+v, %v; want two deliveries", recs, err)
	}
	get(t, c, s.Bucket, "acme/job-1/out.pdf", pdf, recs[0])
	get(t, c, s.Bucket, "acme/job-1/page-2.png", png, recs[1])
	if recs[1].Destination != s.Bucket+"/acme/job-1/page-2.png" {
		t.Errorf("destination %q, want bucket/key", recs[1].Destination)
	}
}

func TestDeliverToAnExpiredURLFailsWithoutRetrying(t *testing.T) {
	s := testenv.StartS3(t)
	c := client(t, s)
	put, err := c.PresignedPutObject(context.Background(), s.Bucket, "late.pdf", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond)
	recs, err := uploader(loopback, nil).Deliver(context.Background(), deliver.Spec{PutURLs: map[string]string{"a.pdf": put.String()}},
		[]deliver.Output{{Name: "a.pdf", Data: []byte("%PDF")}})
	if err == nil || len(recs) != 1 || recs[0].Status != deliver.Failed || recs[0].Attempts != 1 || !strings.Contains(recs[0].Error, "403") {
		t.Fatalf("got %+v, %v; want one failed attempt answered 403", recs, err)
	}
	if strings.Contains(err.Error()+recs[0].Error+recs[0].Destination, "X-Amz-Signature") {
		t.Errorf("the failure shows the presigned query: %v %+v", err, recs[0])
	}
	if _, err := c.StatObject(context.Background(), s.Bucket, "late.pdf", minio.StatObjectOptions{}); err == nil {
		t.Error("the expired URL wrote the object")
	}
}
