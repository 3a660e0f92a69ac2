package queue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/blobs"
)

// blobChunk is the most of a blob one GETRANGE fetches: what a reader
// holds at a time, whatever the blob's size.
const blobChunk = 256 << 10

// BlobReader reads a blob from Redis a chunk at a time (GETRANGE), so a
// download holds one chunk rather than the whole blob. It is an
// io.ReadSeeker, for http.ServeContent and its Range support.
//
// What it fetches stays within three times what it returns, however it is
// read: a fetch after a seek is what that Read asks for, and each fetch of
// a run read in order doubles the one before, up to blobChunk. A whole
// download takes a few round trips more than fixed chunks would; a reader
// that jumps about (ServeContent answering "bytes=0-0,-1,0-0,-1,…") no
// longer fetches a whole chunk for each byte it returns.
type BlobReader struct {
	ctx    context.Context
	rdb    redis.UniversalClient
	key    string
	size   int64
	off    int64
	buf    []byte // the chunk at bufOff
	bufOff int64
}

// redisBlobs is the default blobs.Store: keys of the queue's Redis with
// the retention as their TTL.
type redisBlobs struct{ rdb redis.UniversalClient }

func (r redisBlobs) Put(ctx context.Context, key string, data []byte, ttl time.Duration) error {
	return r.rdb.Set(ctx, key, data, ttl).Err()
}

func (r redisBlobs) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := r.rdb.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, blobs.ErrNotFound
	}
	return b, err
}

func (r redisBlobs) Delete(ctx context.Context, keys ...string) error {
	return r.rdb.Del(ctx, keys...).Err()
}

// Open returns a reader of the blob at key, or ErrNoBlob. Blobs are
// written once and never changed, so the chunks read later belong to the
// same blob; one that expires mid-read ends with io.ErrUnexpectedEOF.
func (r redisBlobs) Open(ctx context.Context, key string) (blobs.Blob, error) {
	pipe := r.rdb.Pipeline()
	exists, size := pipe.Exists(ctx, key), pipe.StrLen(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	if exists.Val() == 0 {
		return nil, ErrNoBlob
	}
	return &BlobReader{ctx: ctx, rdb: r.rdb, key: key, size: size.Val()}, nil
}

// Close lets the held chunk go; the reader holds no connection.
func (b *BlobReader) Close() error {
	b.buf = nil
	return nil
}

// Size is the blob's length in bytes.
func (b *BlobReader) Size() int64 { return b.size }

// Read reads from the current offset, fetching when the offset leaves
// the bytes held: len(p) bytes, or twice the last fetch when the read
// goes on where it ended, at most blobChunk.
func (b *BlobReader) Read(p []byte) (int, error) {
	if b.off >= b.size {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	held := b.bufOff + int64(len(b.buf))
	if b.off < b.bufOff || b.off >= held {
		want := int64(len(p))
		if len(b.buf) > 0 && b.off == held {
			want = max(want, 2*int64(len(b.buf)))
		}
		end := min(b.off+min(want, blobChunk), b.size) - 1 // GETRANGE's end is inclusive
		s, err := b.rdb.GetRange(b.ctx, b.key, b.off, end).Result()
		if err != nil {
			return 0, fmt.Errorf("reading blob %s at %d: %w", b.key, b.off, err)
		}
		if int64(len(s)) != end-b.off+1 {
			// Expired (GETRANGE of a missing key is "") or replaced.
			return 0, fmt.Errorf("reading blob %s at %d: got %d bytes, want %d: %w", b.key, b.off, len(s), end-b.off+1, io.ErrUnexpectedEOF)
		}
		b.buf = append(b.buf[:0], s...)
		b.bufOff = b.off
	}
	n := copy(p, b.buf[b.off-b.bufOff:])
	b.off += int64(n)
	return n, nil
}

// Seek sets the offset for the next Read; it costs no round trip.
func (b *BlobReader) Seek(offset int64, whence int) (int64, error) {
	off, err := blobs.Seek(b.off, b.size, offset, whence)
	if err == nil {
		b.off = off
	}
	return off, err
}
