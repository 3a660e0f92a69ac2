package queue

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/testenv"
)

// testQueue returns a Queue on a private Redis of the test's own.
func testQueue(t *testing.T, retention time.Duration) *Queue {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(t, false)})
	t.Cleanup(func() { rdb.Close() })
	return New(rdb, retention)
}

// A blob is read a chunk at a time, from any offset, to the same bytes as
// GET; a missing blob is ErrNoBlob and one deleted mid-read is cut short.
func TestBlobReaderReadsChunksAndSeeks(t *testing.T) {
	q := testQueue(t, time.Hour)
	rdb := q.Redis()
	ctx := context.Background()
	data := make([]byte, 3*blobChunk+123)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := q.PutBlob(ctx, "b", data); err != nil {
		t.Fatal(err)
	}
	b, err := q.OpenBlob(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if b.Size() != int64(len(data)) {
		t.Fatalf("got size %d, want %d", b.Size(), len(data))
	}
	got, err := io.ReadAll(b)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadAll: %d bytes, %v; want the %d bytes written", len(got), err, len(data))
	}
	for _, off := range []int64{0, 1, blobChunk - 1, blobChunk, 2*blobChunk + 5, int64(len(data)) - 1} {
		if _, err := b.Seek(off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		p := make([]byte, 10)
		n, err := io.ReadFull(b, p)
		want := data[off:min(off+10, int64(len(data)))]
		if !bytes.Equal(p[:n], want) || (err != nil && n != len(want)) {
			t.Errorf("at %d: got % x (%v), want % x", off, p[:n], err, want)
		}
	}
	if _, err := q.OpenBlob(ctx, "missing"); !errors.Is(err, ErrNoBlob) {
		t.Errorf("a missing blob: got %v, want ErrNoBlob", err)
	}
	if err := q.PutBlob(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if e, err := q.OpenBlob(ctx, "empty"); err != nil || e.Size() != 0 {
		t.Errorf("an empty blob: got %v, %v; want a reader of 0 bytes", e, err)
	}
	_, _ = b.Seek(0, io.SeekStart)
	_, _ = b.Read(make([]byte, 1)) // holds the first chunk
	rdb.Del(ctx, "b")
	_, _ = b.Seek(blobChunk, io.SeekStart)
	if _, err := b.Read(make([]byte, 1)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("reading a blob deleted mid-read: got %v, want io.ErrUnexpectedEOF", err)
	}
}
