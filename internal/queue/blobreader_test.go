//go:build !unit

package queue

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
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

// openTestBlob stores a blob of three chunks and a bit at "b" and opens
// it.
func openTestBlob(t *testing.T, q *Queue) ([]byte, *BlobReader) {
	t.Helper()
	data := make([]byte, 3*blobChunk+123)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := q.PutBlob(context.Background(), "b", data); err != nil {
		t.Fatal(err)
	}
	b, err := q.OpenBlob(context.Background(), "b")
	if err != nil {
		t.Fatal(err)
	}
	return data, b.(*BlobReader)
}

// A blob is read a chunk at a time, from any offset, to the same bytes as
// GET; a missing blob is ErrNoBlob and one deleted mid-read is cut short.
func TestBlobReaderReadsChunksAndSeeks(t *testing.T) {
	q := testQueue(t, time.Hour)
	rdb := q.Redis()
	ctx := context.Background()
	data, b := openTestBlob(t, q)
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

// What a reader fetches stays within three times what it returns, however
// it is read: one that jumps between the first and the last byte (as
// http.ServeContent does for "bytes=0-0,-1,0-0,-1,…") fetched a whole
// chunk for each byte; one that reads in order still takes a few
// GETRANGEs for a blob of several chunks.
func TestBlobReaderFetchesAboutWhatItReads(t *testing.T) {
	q := testQueue(t, time.Hour)
	ctx := context.Background()
	data, b := openTestBlob(t, q)
	const jumps = 1000
	jumped := testenv.RedisSent(t, q.Redis(), func() {
		for range jumps {
			for _, off := range []int64{0, int64(len(data)) - 1} {
				_, _ = b.Seek(off, io.SeekStart)
				p := make([]byte, 1)
				if _, err := io.ReadFull(b, p); err != nil || p[0] != data[off] {
					t.Fatalf("at %d: got %x (%v), want %x", off, p[0], err, data[off])
				}
			}
		}
	})
	// A GETRANGE answer of one byte is "$1\r\nX\r\n": 7 bytes; INFO's
	// count of itself may differ by a digit.
	if want := int64(2*jumps*7 + 64); jumped > want {
		t.Errorf("%d one-byte reads, jumping: Redis sent %d bytes, want at most %d", 2*jumps, jumped, want)
	}

	_, _ = b.Seek(0, io.SeekStart)
	calls := func() int {
		info := q.Redis().Info(ctx, "commandstats").Val()
		var n int
		if _, v, ok := strings.Cut(info, "cmdstat_getrange:calls="); ok {
			n, _ = strconv.Atoi(v[:strings.IndexByte(v, ',')])
		}
		return n
	}
	before := calls()
	var got []byte
	sent := testenv.RedisSent(t, q.Redis(), func() {
		p := make([]byte, 32<<10) // io.Copy's buffer
		for {
			n, err := b.Read(p)
			got = append(got, p[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	})
	fetches := calls() - before
	t.Logf("jumping: %d bytes from Redis for %d read; in order: %d GETRANGEs, %d bytes for %d", jumped, 2*jumps, fetches, sent, len(data))
	if !bytes.Equal(got, data) {
		t.Fatalf("read in order: %d bytes, not the %d written", len(got), len(data))
	}
	if fetches > 8 || sent > int64(len(data))+1024 {
		t.Errorf("read in order with 32 KiB reads: %d GETRANGEs, %d bytes from Redis; want at most 8 and %d", fetches, sent, len(data)+1024)
	}
}
