package api

import (
	"archive/zip"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/renderbox/renderbox/internal/blobs"
	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/jobstate"
)

// getOutputsZip streams every output of a succeeded job as one ZIP, in
// the record's order, each entry read from Redis a chunk at a time as the
// single download reads it: the API holds a chunk per download, never an
// output, whatever the job's size.
//
// Every entry is stored, none deflated: deflate made the ZIP an
// amplifier, 4.2 MB of repetitive SVG read from Redis and compressed by
// the API for a 10 KB answer. Stored, what a download has Redis send stays
// within what it answers, as for a single output (docs/security.md).
//
// The answers before the first byte match GET …/outputs/{name}: another
// key's job and a job without outputs (not succeeded) are 404, an expired
// output 410, Redis down 503. Every output is looked up before the status
// is sent; one that vanishes mid-stream (past its retention right then)
// aborts the connection, so the client never takes a cut ZIP as whole.
func (s *Server) getOutputsZip(w http.ResponseWriter, r *http.Request) {
	job, err := s.Ledger.GetJob(r.Context(), keyOf(r).ID, chi.URLParam(r, "id"))
	if err != nil {
		s.ledgerProblem(w, r, err)
		return
	}
	if job.State != jobstate.Succeeded {
		problem(w, http.StatusNotFound, "not_found", fmt.Sprintf("the job is %s: only a succeeded job has outputs", job.State))
		return
	}
	readers := make([]blobs.Blob, len(job.Outputs))
	defer func() {
		for _, b := range readers {
			if b != nil {
				b.Close()
			}
		}
	}()
	var total int64
	for i, o := range job.Outputs {
		blob, err := s.Queue.OpenBlob(r.Context(), queue.OutputKey(job.ID, o.Name))
		if err != nil {
			blobProblem(w, o.Name, err)
			return
		}
		readers[i], total = blob, total+blob.Size()
	}
	name := job.ID + ".zip"
	if job.OutputName != "" {
		name = job.OutputName + ".zip"
	}
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// As for one output: the write timeout plus the outputs' size at the
	// minimum rate.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.HTTP.WriteTimeout +
		time.Duration(float64(total)/float64(s.HTTP.MinRate)*float64(time.Second))))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return // the checks above are HEAD's answer; the ZIP would be read from Redis only to be dropped
	}

	zw := zip.NewWriter(w)
	for i, o := range job.Outputs {
		fw, err := zw.CreateHeader(&zip.FileHeader{Name: o.Name, Method: zip.Store, Modified: job.FinishedAt.UTC()})
		if err == nil {
			_, err = io.Copy(fw, readers[i])
		}
		// A read blob keeps its last chunk: let it go (20 pages held
		// 5 MiB per download until the end).
		readers[i].Close()
		readers[i] = nil
		if err != nil {
			s.abortZip(r, job.ID, o.Name, err)
		}
	}
	if err := zw.Close(); err != nil {
		s.abortZip(r, job.ID, "", err)
	}
}

// abortZip ends a ZIP download that failed after its status went out:
// the connection is cut rather than the response ended as if whole.
func (s *Server) abortZip(r *http.Request, job, output string, err error) {
	if r.Context().Err() == nil { // not the client hanging up
		s.reqLog(r).Warn("streaming outputs.zip", "job_id", job, "output", output, "err", err)
	}
	panic(http.ErrAbortHandler)
}
