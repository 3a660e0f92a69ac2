// Package blobs is where a job's documents live for their retention: its
// input, written once by the API and read by a worker, and its outputs,
// written by the worker and read by downloads. Two stores share one
// interface: Redis, the queue's own connection (the default, one host;
// queue.Queue implements it), and an S3-compatible object store chosen by
// URL (S3), with which Redis carries only references to the objects
// (docs/operations.md, "Object storage").
package blobs

import (
	"context"
	"errors"
	"io"
	"net/url"
	"time"
)

// ErrNotFound means the blob does not exist: never written, or deleted
// past its retention.
var ErrNotFound = errors.New("blob not found or expired")

// Blob is an opened blob: read in order or after a seek (http.ServeContent
// answers Range with it), holding a bounded buffer whatever its size.
// Close releases its connection.
type Blob interface {
	io.ReadSeeker
	io.Closer
	// Size is the blob's length in bytes.
	Size() int64
}

// Store keeps blobs under keys for a time to live. Keys are the queue's
// (queue.InputKey, queue.OutputKey); a blob is written once and never
// changed.
type Store interface {
	// Put stores data under key for ttl.
	Put(ctx context.Context, key string, data []byte, ttl time.Duration) error
	// Get reads a whole blob, or ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Open opens a blob for reading, or ErrNotFound.
	Open(ctx context.Context, key string) (Blob, error)
	// Delete deletes the blobs; a missing one is no error.
	Delete(ctx context.Context, keys ...string) error
}

// Presigner is a store whose blobs a client can fetch without the API in
// between: a URL valid for expiry that answers GET (and Range) with the
// blob, the response's Content-Type and Content-Disposition set to
// mediaType and disposition.
type Presigner interface {
	PresignGet(ctx context.Context, key string, expiry time.Duration, mediaType, disposition string) (*url.URL, error)
}

// Sweeper is a store whose blobs do not expire by themselves within
// their time to live: the API's janitor deletes those written before
// cutoff (docs/operations.md, "Retention").
type Sweeper interface {
	DeleteBefore(ctx context.Context, cutoff time.Time) (int, error)
}

// Seek is io.Seeker's arithmetic for a blob of size read at off: the new
// offset, which may lie past the end (a read there is io.EOF).
func Seek(off, size, offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += off
	case io.SeekEnd:
		offset += size
	default:
		return 0, errors.New("blob reader: invalid whence")
	}
	if offset < 0 {
		return 0, errors.New("blob reader: negative position")
	}
	return offset, nil
}
