package api

import (
	"net/http"
	"time"

	"github.com/renderbox/renderbox/internal/blobs"
	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/internal/queue"
)

// BlobDownloads says how outputs kept in an object store are downloaded
// (blobs.Config's -blobs-downloads and -blobs-presign-expiry). With Redis
// they always stream through the API.
type BlobDownloads struct {
	// Mode is blobs.Redirect (the default) or blobs.Proxy.
	Mode string
	// Expiry is how long a redirect's presigned URL is valid. Default 5m.
	Expiry time.Duration
}

// redirectOutput answers a GET of an output in an object store with a
// 302 to a presigned URL of its object, so the bytes go from the store to
// the client at the store's speed; the client sends its Range there. The
// API still answers what it can without the bytes: HEAD (streamed as
// with Redis, which reads none), and If-None-Match with the output's
// ETag (304). It reports whether it answered.
func (s *Server) redirectOutput(w http.ResponseWriter, r *http.Request, job string, out *ledger.Output, disposition string) bool {
	p, ok := s.Queue.Blobs.(blobs.Presigner)
	if !ok || s.BlobDownloads.Mode == blobs.Proxy || r.Method != http.MethodGet {
		return false
	}
	if etagMatches(r.Header.Get("If-None-Match"), `"`+out.SHA256+`"`) {
		w.WriteHeader(http.StatusNotModified)
		return true
	}
	expiry := s.BlobDownloads.Expiry
	if expiry <= 0 {
		expiry = 5 * time.Minute
	}
	u, err := p.PresignGet(r.Context(), queue.OutputKey(job, out.Name), expiry, out.MediaType, disposition)
	if err != nil {
		blobProblem(w, out.Name, err)
		return true
	}
	// The URL is a bearer credential for a few minutes: no cache keeps it.
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", u.String())
	w.WriteHeader(http.StatusFound)
	return true
}

// etagMatches reports whether an If-None-Match header names etag (or *),
// by weak comparison as RFC 9110 §13.1.2 has it.
func etagMatches(header, etag string) bool {
	for header != "" {
		header = trimOWS(header)
		if header == "" {
			break
		}
		if header[0] == ',' {
			header = header[1:]
			continue
		}
		if header[0] == '*' {
			return true
		}
		end := 0
		for end < len(header) && header[end] != ',' {
			end++
		}
		tag := trimOWS(header[:end])
		if len(tag) > 2 && tag[:2] == "W/" {
			tag = tag[2:]
		}
		if tag == etag {
			return true
		}
		header = header[end:]
	}
	return false
}

func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
