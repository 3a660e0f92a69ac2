//go:build !unit

package blobs_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/blobs"
	"github.com/renderbox/renderbox/internal/testenv"
)

// The object store against a real S3-compatible server: a blob written
// is read back whole, in ranges and after seeks; a missing one is
// ErrNotFound; a presigned URL serves it (and its Range) without keys;
// the janitor's sweep deletes what is past the retention and nothing
// else; Delete deletes.
func TestS3Store(t *testing.T) {
	srv := testenv.StartS3(t)
	ctx := context.Background()
	st := srv.Store("store-test")
	data := make([]byte, 3<<20+17)
	_, _ = rand.NewChaCha8([32]byte{3}).Read(data)
	if err := st.Put(ctx, "big", data, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "empty", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, "big")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %d bytes (equal %v), %v; want the %d written", len(got), bytes.Equal(got, data), err, len(data))
	}
	if e, err := st.Get(ctx, "empty"); err != nil || len(e) != 0 {
		t.Errorf("Get of an empty blob: %q, %v", e, err)
	}
	if _, err := st.Open(ctx, "missing"); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("Open of a missing blob: %v, want ErrNotFound", err)
	}
	if _, err := st.Get(ctx, "missing"); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("Get of a missing blob: %v, want ErrNotFound", err)
	}

	b, err := st.Open(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Size() != int64(len(data)) {
		t.Errorf("Size %d, want %d", b.Size(), len(data))
	}
	for _, r := range []struct{ off, n int64 }{{0, 10}, {1 << 20, 4096}, {int64(len(data)) - 5, 5}, {7, 1}, {2 << 20, 1 << 20}} {
		if _, err := b.Seek(r.off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, r.n)
		if _, err := io.ReadFull(b, buf); err != nil || !bytes.Equal(buf, data[r.off:r.off+r.n]) {
			t.Errorf("%d bytes at %d: equal %v, %v", r.n, r.off, bytes.Equal(buf, data[r.off:r.off+r.n]), err)
		}
	}
	if _, err := b.Seek(0, io.SeekEnd); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("a read at the end: %d, %v; want 0, EOF", n, err)
	}

	u, err := st.PresignGet(ctx, "big", time.Minute, "image/png", `attachment; filename="x.png"`)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", u.String(), nil)
	req.Header.Set("Range", "bytes=100-199")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 206 || !bytes.Equal(body, data[100:200]) {
		t.Errorf("presigned GET with a Range: %d, %d bytes (equal %v)", resp.StatusCode, len(body), bytes.Equal(body, data[100:200]))
	}
	if ct, cd := resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"); ct != "image/png" || !strings.Contains(cd, "x.png") {
		t.Errorf("presigned GET: Content-Type %q, Content-Disposition %q; want those signed", ct, cd)
	}
	bad := strings.Replace(u.String(), "X-Amz-Signature=", "X-Amz-Signature=0", 1)
	if resp, err := http.Get(bad); err != nil || resp.StatusCode != 403 {
		t.Errorf("a presigned URL altered: %v %v, want 403", resp.Status, err)
	}

	// The sweep: what was written before the cutoff goes, what after stays.
	time.Sleep(1100 * time.Millisecond) // S3 times are in seconds
	cutoff := time.Now()
	time.Sleep(1100 * time.Millisecond)
	if err := st.Put(ctx, "fresh", []byte("new"), time.Hour); err != nil {
		t.Fatal(err)
	}
	n, err := st.DeleteBefore(ctx, cutoff)
	if err != nil || n != 2 {
		t.Errorf("DeleteBefore: %d, %v; want the 2 older blobs", n, err)
	}
	if _, err := st.Open(ctx, "big"); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("a blob past the cutoff after the sweep: %v, want ErrNotFound", err)
	}
	if _, err := st.Open(ctx, "fresh"); err != nil {
		t.Errorf("a blob after the cutoff: %v, want it kept", err)
	}
	// Another prefix is another deployment's: the sweep never reaches it.
	other := srv.Store("other")
	if _, err := other.Open(ctx, "fresh"); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("another prefix sees this one's blob: %v", err)
	}
	if err := st.Delete(ctx, "fresh", "never-written"); err != nil {
		t.Errorf("Delete: %v", err)
	}
	if _, err := st.Open(ctx, "fresh"); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("a deleted blob: %v, want ErrNotFound", err)
	}
	// A lifecycle rule where the server has them; SeaweedFS's answer is
	// logged, as the API logs it.
	if err := st.ExpireAfter(ctx, 24*time.Hour); err != nil {
		t.Logf("lifecycle rule: %v (the janitor alone deletes)", err)
	} else {
		t.Logf("lifecycle rule set")
	}
}

// A store that is down answers errors, not ErrNotFound: a download is a
// 503 to retry, not a 410.
func TestS3StoreDown(t *testing.T) {
	srv := testenv.StartS3(t)
	ctx := context.Background()
	st := srv.Store("down")
	if err := st.Put(ctx, "k", []byte("v"), time.Hour); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := st.Open(cctx, "k"); err == nil || errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("Open with the store down: %v, want an error other than ErrNotFound", err)
	}
	if err := st.Put(cctx, "k2", []byte("v"), time.Hour); err == nil {
		t.Errorf("Put with the store down: no error")
	}
	srv.Start()
	if got, err := st.Get(ctx, "k"); err != nil || string(got) != "v" {
		t.Errorf("after a restart: %q, %v; want the blob kept", got, err)
	}
}
