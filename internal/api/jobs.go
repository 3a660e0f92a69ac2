package api

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/renderbox/renderbox/internal/deliver"
	"github.com/renderbox/renderbox/internal/fetch"
	"github.com/renderbox/renderbox/internal/jobspec"
	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/tracing"
	"github.com/renderbox/renderbox/jobstate"
)

// jobView is a job as the API shows it.
type jobView struct {
	ID       string          `json:"id"`
	Renderer string          `json:"renderer"`
	State    jobstate.State  `json:"state"`
	Options  json.RawMessage `json:"options"`
	Input    inputView       `json:"input"`
	Attempts int             `json:"attempts"`
	// OutputName is the client's base name for the outputs, if it gave one.
	OutputName string `json:"output_name,omitempty"`
	// RequestID is the X-Request-Id of the request that submitted the job.
	RequestID string `json:"request_id,omitempty"`
	// SandboxMode: cold, prebooted or restored, once a sandbox ran it.
	SandboxMode string `json:"sandbox_mode,omitempty"`
	// Worker: which worker ended the job and the rootfs it ran, once one did.
	Worker     *jobWorkerView `json:"worker,omitempty"`
	CreatedAt  time.Time      `json:"created_at"`
	StartedAt  *time.Time     `json:"started_at,omitempty"`
	FinishedAt *time.Time     `json:"finished_at,omitempty"`
	Error      *errorView     `json:"error,omitempty"`
	Outputs    []outputView   `json:"outputs"`
	// OutputsZipURL downloads every output as one ZIP, once the job
	// succeeded.
	OutputsZipURL string       `json:"outputs_zip_url,omitempty"`
	Webhook       *webhookView `json:"webhook,omitempty"`
	// Diagnostics: what the page asked for and could not have, and the
	// errors it logged; for a job of several sandboxes (safe-pdf), each
	// stage's outcome and time.
	Diagnostics json.RawMessage `json:"diagnostics,omitempty"`
}

type inputView struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	Type   string `json:"type,omitempty"`
}

type jobWorkerView struct {
	Name         string `json:"name"`
	RootfsDigest string `json:"rootfs_digest"`
}

type errorView struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type outputView struct {
	Name      string `json:"name"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`
	MediaType string `json:"media_type"`
	URL       string `json:"url"`
}

// view is j as the API shows it, its URLs under s.PublicURL.
func (s *Server) view(j ledger.Job) jobView {
	v := jobView{
		ID: j.ID, Renderer: j.Renderer, State: j.State, Options: j.Options,
		Input: inputView{SHA256: j.InputSHA256, Size: j.InputSize, Type: j.InputType}, Attempts: j.Attempts, OutputName: j.OutputName, RequestID: j.RequestID,
		SandboxMode: j.SandboxMode, CreatedAt: j.CreatedAt.UTC(), Outputs: []outputView{}, Diagnostics: j.Diagnostics,
	}
	if len(v.Options) == 0 {
		v.Options = json.RawMessage("{}")
	}
	v.StartedAt, v.FinishedAt = utcOrNil(j.StartedAt), utcOrNil(j.FinishedAt)
	if j.Worker != "" || j.RootfsDigest != "" {
		v.Worker = &jobWorkerView{Name: j.Worker, RootfsDigest: j.RootfsDigest}
	}
	if j.ErrorCode != "" {
		v.Error = &errorView{Code: j.ErrorCode, Message: j.ErrorMessage}
	}
	for _, o := range j.Outputs {
		v.Outputs = append(v.Outputs, outputView{
			Name: o.Name, Size: o.Size, SHA256: o.SHA256, MediaType: o.MediaType,
			URL: s.link("/v1/jobs/" + j.ID + "/outputs/" + url.PathEscape(o.Name)),
		})
	}
	if j.State == jobstate.Succeeded {
		v.OutputsZipURL = s.link("/v1/jobs/" + j.ID + "/outputs.zip")
	}
	return v
}

// utcOrNil is t in UTC, or nil for the zero time (a field left out).
func utcOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// submission is a parsed POST /v1/jobs.
type submission struct {
	Renderer string
	Input    []byte
	Options  json.RawMessage
	Limits   json.RawMessage
	// Then is the renderers after Renderer in a chain, as sent; read into
	// Renderer and Options once the body is read (intake.chain).
	Then        json.RawMessage
	CallbackURL string
	// InputType is the client's input_type; PartType the file part's
	// Content-Type when it names a declarable text type.
	InputType, PartType string
	OutputName          string // checked by render.CheckOutputName
	// Files is how many file parts a multipart body had (Input packs
	// them into a ZIP when there are several); 0 for a JSON body.
	Files int
	// DownloadFrom is the download_from list as sent (JSON): the input
	// is fetched from these URLs (download.go) instead of uploaded.
	DownloadFrom json.RawMessage
	// URL is the page's address (html-pdf, html-png), fetched by the
	// worker's broker; the job's input is then the URL itself.
	URL string
	// Deliver is the deliver field as sent (JSON); Destination, once
	// checked by the delivery policy (destination). Only the task
	// carries it: its URLs are secrets.
	Deliver     json.RawMessage
	Destination *deliver.Spec
}

var errBadRequest = errors.New("bad request")

// errUnsupportedMediaType: the body is neither of the two types a
// submission comes in (RFC 9110 §15.5.16: 415, not 400, so a client can
// tell a wrong encoding from a wrong field).
var errUnsupportedMediaType = errors.New("unsupported media type")

func (s *Server) createJob(w http.ResponseWriter, r *http.Request) {
	key := keyOf(r)
	ctx, span := s.startSpan(r.Context(), tracing.SpanIntake, trace.WithAttributes(tracing.KeyID.String(key.ID)))
	defer span.End() // on a refusal; an accepted job's ends before the answer
	r = r.WithContext(ctx)
	if ok, d := s.limiters.allow(key.ID); !ok {
		w.Header().Set("Retry-After", retryAfter(d))
		problem(w, http.StatusTooManyRequests, "rate_limited", fmt.Sprintf("this key submits faster than %g jobs/s", s.Limits.RatePerSecond))
		return
	}
	wait, err := parseWait(r.URL.Query().Get("wait"), s.Limits.MaxWait)
	if err != nil {
		problem(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	idem := r.Header.Get("Idempotency-Key")
	if err := ledger.CheckIdempotencyKey(idem); err != nil {
		problem(w, http.StatusBadRequest, "invalid_idempotency_key", err.Error())
		return
	}
	lookup := render.Lookup
	if s.Diagnostics {
		lookup = render.LookupWithDiagnostics
	}
	sub, rd, err := readSubmission(r, s.Limits.MaxBodyBytes, lookup)
	if err != nil {
		abandonBody(w, r)
	}
	if err != nil && bodyTooSlow(r) {
		w.Header().Set("Connection", "close")
		problem(w, http.StatusRequestTimeout, "request_timeout", fmt.Sprintf("the request body arrived slower than %d bytes/s after a grace of %s", s.HTTP.MinRate, s.HTTP.BodyTimeout))
		return
	}
	if err != nil {
		intakeProblem(w, err)
		return
	}
	span.SetAttributes(tracing.Renderer.String(rd.Name), tracing.InputBytes.Int(len(sub.Input)), tracing.Callback.Bool(sub.CallbackURL != ""))
	if sub.CallbackURL != "" {
		if !s.Webhooks.enabled() {
			problem(w, http.StatusBadRequest, "webhooks_disabled", "this server does not send webhooks: poll GET /v1/jobs/{id} or use ?wait=")
			return
		}
		if _, err := s.Webhooks.Policy.CheckURL(sub.CallbackURL); err != nil {
			problem(w, http.StatusBadRequest, "invalid_callback_url", err.Error())
			return
		}
	}
	if sub.Deliver != nil {
		if sub.Destination, err = s.destination(sub.Deliver); err != nil {
			code := "invalid_deliver"
			if errors.Is(err, deliver.ErrRefused) {
				code = "delivery_refused"
			}
			problem(w, http.StatusBadRequest, code, err.Error())
			return
		}
	}
	if sub.Files > 1 && !rd.TakesSeveralFiles() {
		// The parts were packed into a ZIP (addFile); the refusal speaks
		// of what the client sent, not of that archive.
		problem(w, http.StatusBadRequest, "unsupported_input", fmt.Sprintf("%v: %s takes one file, and the request has %d file parts; send each file in a job of its own", render.ErrUnsupportedInput, rd.Name, sub.Files))
		return
	}
	var fetched []fetch.Record
	if sub.DownloadFrom != nil {
		if !s.Remote.Enabled {
			problem(w, http.StatusBadRequest, "remote_content_disabled", "this server does not fetch inputs from URLs (download_from); its operator turns that on with "+fetch.Setting)
			return
		}
		if !s.fetching.TryTake(key.ID) {
			tooManyRequests(w, fmt.Sprintf("this key has %d submissions fetching their input already", s.Remote.MaxPerKey))
			return
		}
		fetched, err = s.download(r.Context(), sub, rd)
		s.fetching.Give(key.ID)
		if err != nil {
			downloadProblem(w, err, fetched)
			return
		}
		// The answer's write deadline ran while the input was fetched;
		// it starts again, as it does from the end of an uploaded body.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.HTTP.WriteTimeout))
	}
	plan, err := rd.PrepareTyped(sub.Input, sub.InputType, sub.Options, sub.Limits)
	if errors.Is(err, render.ErrUnsupportedInput) && sub.InputType == "" && sub.PartType != "" {
		// The bytes alone do not fit: the file part's type may.
		if p, perr := rd.PrepareTyped(sub.Input, sub.PartType, sub.Options, sub.Limits); perr == nil {
			plan, err, sub.InputType = p, nil, sub.PartType
		}
	}
	if err != nil {
		renderProblem(w, err)
		return
	}
	if plan.InputType == render.TypeURL && !s.Remote.Enabled {
		problem(w, http.StatusBadRequest, "remote_content_disabled", "this server does not render pages from URLs (url); its operator turns that on with "+fetch.Setting+" on the API and the workers")
		return
	}
	span.SetAttributes(tracing.InputType.String(plan.InputType))
	if !s.admit(w, r, key.ID, int64(len(sub.Input))) {
		return
	}
	sum := sha256.Sum256(sub.Input)
	// The record never holds a secret option (a document's password): the
	// job shows it redacted. Only the queued task carries it (see enqueue).
	opts, _ := json.Marshal(rd.Recorded(plan.Options))
	limits, _ := json.Marshal(plan.Request)
	want := ledger.Job{
		Owner: key.ID, Renderer: rd.Name, Options: opts, Limits: limits, InputSHA256: hex.EncodeToString(sum[:]),
		InputSize: int64(len(sub.Input)), InputType: plan.InputType, IdempotencyKey: idem, CallbackURL: sub.CallbackURL,
		OutputName: sub.OutputName, RequestID: requestIDOf(r), Diagnostics: fetchedDiagnostics(fetched),
		TraceParent: tracing.TraceParent(ctx), SecretsDigest: s.secretsDigest(plan.Options, sub.Destination),
	}
	job, created, err := s.Ledger.CreateJob(ctx, want)
	span.SetAttributes(tracing.JobID.String(job.ID))
	if err != nil {
		s.reqLog(r).Error("recording a job", "err", err)
		problem(w, http.StatusInternalServerError, "internal", "recording the job failed")
		return
	}
	if !created {
		if what := ledger.Differs(job, want); what != "" {
			problem(w, http.StatusUnprocessableEntity, "idempotency_conflict", "this Idempotency-Key was used for a request with another "+what)
			return
		}
		lost, err := s.lostAtIntake(ctx, job)
		if err != nil {
			w.Header().Set("Retry-After", "5")
			problem(w, http.StatusServiceUnavailable, "unavailable", "the queue is unreachable; retry later")
			return
		}
		if !lost {
			span.End() // ?wait= is the request's, not the intake's
			s.respondJob(w, r, job, wait, http.StatusOK)
			return
		}
		// Queued now, and answered as its first request would have been.
		s.reqLog(r).Warn("queueing a job its first request recorded and did not queue", "job_id", job.ID)
	}
	if err := s.enqueue(r, job, sub, plan); err != nil {
		// The job was accepted into the ledger: it must still end.
		_, _ = s.Ledger.Finish(ctx, job.ID, ledger.FinishOptions{State: jobstate.Failed, ErrorCode: "internal", ErrorMessage: "the job could not be queued", At: time.Now()})
		s.wakeWebhooks()
		s.reqLog(r).Error("queueing a job", "job_id", job.ID, "err", err)
		w.Header().Set("Retry-After", "5")
		if errors.Is(err, queue.ErrBlobStore) {
			problem(w, http.StatusServiceUnavailable, "unavailable", "the document store is unreachable; retry later")
			return
		}
		problem(w, http.StatusServiceUnavailable, "unavailable", "the queue is unreachable; retry later")
		return
	}
	s.metrics.accepted.WithLabelValues(rd.Name).Inc()
	span.End() // ?wait= is the request's, not the intake's
	s.respondJob(w, r, job, wait, http.StatusAccepted)
}

func (s *Server) enqueue(r *http.Request, job ledger.Job, sub *submission, plan *render.Plan) (err error) {
	// The worker's spans are children of this one (Payload.TraceParent).
	ctx, span := s.startSpan(r.Context(), tracing.SpanSubmit, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(tracing.JobID.String(job.ID)))
	defer func() {
		if err != nil {
			span.SetStatus(codes.Error, "queueing the job failed")
		}
		span.End()
	}()
	if s.Queue.BlobsInRedis() {
		s.memory.add(2*int64(len(sub.Input)) + jobOverhead)
	} else {
		s.memory.add(jobOverhead) // the input goes to the object store
	}
	// An attempt may run the sandbox's whole time limit plus its set-up
	// and tear-down; asynq's deadline stays outside the sandbox's.
	timeout := plan.Limits.Timeout + jobspec.AttemptSlack
	opts, err := json.Marshal(plan.Options)
	if err != nil {
		return err
	}
	// The task carries the validated limits, never the client's text,
	// which could be any size (docs/security.md, "Request intake bounds").
	// The job waits in its key's list; the dispatcher hands it to asynq in
	// turn with other keys' jobs (see RunQueue).
	err = s.Queue.SubmitInput(ctx, queue.Payload{
		JobID: job.ID, Owner: job.Owner, Renderer: job.Renderer, Options: opts, Limits: job.Limits,
		InputType: sub.InputType, OutputName: job.OutputName, Accepted: job.CreatedAt, RequestID: requestIDOf(r),
		TraceParent: tracing.TraceParent(ctx), Deliver: sub.Destination,
	}, sub.Input, timeout, s.Limits.MaxRetry)
	if err == nil {
		s.wakeDispatcher()
	}
	return err
}

// secretsDigest is what a job's record keeps of what it leaves out, the
// options' secrets (a document's password) and the delivery destination,
// so that a replayed Idempotency-Key with another of either is a conflict
// (ledger.Differs): HMAC-SHA256 of both under a key derived from the
// master secret every replica shares, so the ledger alone cannot test a
// guessed password. "" without a master secret (webhooks off).
func (s *Server) secretsDigest(options any, dest *deliver.Spec) string {
	if len(s.Webhooks.Master) == 0 {
		return ""
	}
	o, err1 := json.Marshal(options)
	d, err2 := json.Marshal(dest)
	if err1 != nil || err2 != nil {
		return "" // not comparable; never seen: both marshal for the task
	}
	k := hmac.New(sha256.New, s.Webhooks.Master)
	k.Write([]byte("renderbox idempotency secrets v1"))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write(o)
	m.Write([]byte{0})
	m.Write(d)
	return hex.EncodeToString(m.Sum(nil))
}

// destination reads and checks a submission's deliver field
// (internal/deliver). Errors wrap deliver.ErrInvalid or deliver.ErrRefused.
func (s *Server) destination(raw json.RawMessage) (*deliver.Spec, error) {
	var d deliver.Spec
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%w: deliver: want {\"put_urls\": {\"<output name>\": \"<presigned PUT URL>\"}} or {\"s3\": {\"bucket\": …, \"prefix\": …}}: %v", deliver.ErrInvalid, err)
	}
	if err := s.Deliver.Check(d); err != nil {
		return nil, err
	}
	return &d, nil
}

// respondJob answers with the job, first waiting up to wait for it to end.
// A finished job is 200; one still going is status (202 on creation) with
// Location.
func (s *Server) respondJob(w http.ResponseWriter, r *http.Request, job ledger.Job, wait time.Duration, status int) {
	if wait > 0 && !job.State.Terminal() {
		if j, ok := s.waitFor(r, job, wait); ok {
			job = j
		}
	}
	w.Header().Set("Location", s.link("/v1/jobs/"+job.ID))
	if job.State.Terminal() {
		status = http.StatusOK
	}
	writeJSON(w, status, s.withWebhook(r.Context(), s.view(job), job))
}

func parseWait(v string, max time.Duration) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 || n > max.Seconds() {
		return 0, fmt.Errorf("wait must be a number of seconds between 0 and %g", max.Seconds())
	}
	return time.Duration(n * float64(time.Second)), nil
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	job, err := s.Ledger.GetJob(r.Context(), keyOf(r).ID, chi.URLParam(r, "id"))
	if err != nil {
		s.ledgerProblem(w, r, err)
		return
	}
	wait, err := parseWait(r.URL.Query().Get("wait"), s.Limits.MaxWait)
	if err != nil {
		problem(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if wait > 0 && !job.State.Terminal() {
		if j, ok := s.waitFor(r, job, wait); ok {
			job = j
		}
	}
	writeJSON(w, http.StatusOK, s.withWebhook(r.Context(), s.view(job), job))
}

func (s *Server) ledgerProblem(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		problem(w, http.StatusNotFound, "not_found", "no such job")
	case errors.Is(err, ledger.ErrBadCursor), errors.Is(err, ledger.ErrInvalid):
		problem(w, http.StatusBadRequest, "invalid_request", err.Error())
	default:
		s.reqLog(r).Error("ledger", "err", err)
		problem(w, http.StatusInternalServerError, "internal", "reading the ledger failed")
	}
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > ledger.MaxListLimit {
			problem(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("limit must be between 1 and %d", ledger.MaxListLimit))
			return
		}
		limit = n
	}
	state := jobstate.State(q.Get("state"))
	if state != "" && !state.Valid() {
		problem(w, http.StatusBadRequest, "invalid_request", "state must be one of queued, running, succeeded, failed, canceled")
		return
	}
	jobs, next, err := s.Ledger.ListJobs(r.Context(), keyOf(r).ID, ledger.ListOptions{State: state, Cursor: q.Get("cursor"), Limit: limit})
	if err != nil {
		s.ledgerProblem(w, r, err)
		return
	}
	// The same shape as GET /v1/jobs/{id}, webhook included: a client
	// should not have to fetch each job again to see its delivery.
	views := make([]jobView, 0, len(jobs))
	for _, j := range jobs {
		views = append(views, s.withWebhook(r.Context(), s.view(j), j))
	}
	out := map[string]any{"jobs": views}
	if next != "" {
		out["next_cursor"] = next
	}
	writeJSON(w, http.StatusOK, out)
}

// cancelJob cancels a job. DELETE is idempotent (RFC 9110 §9.2.2): a job
// already canceled answers as its cancel did, so a client retrying a
// cancel whose answer it lost is not told of a conflict. Only a job that
// ended otherwise (succeeded, failed) is 409.
func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) {
	job, err := s.Ledger.Cancel(r.Context(), keyOf(r).ID, chi.URLParam(r, "id"))
	if errors.Is(err, ledger.ErrConflict) && job.State == jobstate.Canceled {
		// Signalled again: the marker and the task's removal are
		// idempotent, and a first cancel that found Redis down is then
		// carried out by its retry.
		err = nil
	}
	if errors.Is(err, ledger.ErrConflict) {
		problem(w, http.StatusConflict, "already_finished", fmt.Sprintf("the job already ended as %s", job.State))
		return
	}
	if err != nil {
		s.ledgerProblem(w, r, err)
		return
	}
	if err := s.Queue.Cancel(r.Context(), job.ID); err != nil {
		// The ledger says canceled; the worker will also see the marker
		// the next time Redis answers, or its result is ignored.
		s.reqLog(r).Error("signalling a cancel", "job_id", job.ID, "err", err)
	}
	s.jobEnded(r.Context(), job.ID)
	s.wakeWebhooks()
	writeJSON(w, http.StatusOK, s.withWebhook(r.Context(), s.view(job), job))
}

func (s *Server) getOutput(w http.ResponseWriter, r *http.Request) {
	job, err := s.Ledger.GetJob(r.Context(), keyOf(r).ID, chi.URLParam(r, "id"))
	if err != nil {
		s.ledgerProblem(w, r, err)
		return
	}
	name := chi.URLParam(r, "name")
	var out *ledger.Output
	for i := range job.Outputs {
		if job.Outputs[i].Name == name {
			out = &job.Outputs[i]
		}
	}
	if out == nil {
		problem(w, http.StatusNotFound, "not_found", noSuchOutput(job, name))
		return
	}
	blob, err := s.Queue.OpenBlob(r.Context(), queue.OutputKey(job.ID, name))
	if err != nil {
		blobProblem(w, name, err)
		return
	}
	defer blob.Close()
	disposition := mime.FormatMediaType("attachment", map[string]string{"filename": name})
	w.Header().Set("ETag", `"`+out.SHA256+`"`)
	if s.redirectOutput(w, r, job.ID, out, disposition) {
		return
	}
	w.Header().Set("Content-Type", out.MediaType)
	w.Header().Set("Content-Disposition", disposition)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "sandbox; default-src 'none'")
	// A download may take its size at the minimum rate beyond the usual
	// write timeout; a slower reader is cut off.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.HTTP.WriteTimeout +
		time.Duration(float64(blob.Size())/float64(s.HTTP.MinRate)*float64(time.Second))))
	// ServeContent streams the blob a chunk at a time and answers Range,
	// If-Range, If-None-Match and HEAD; boundRanges first merges the
	// ranges and drops a Range of too many, so no request has Redis send
	// much more than it answers.
	boundRanges(r, blob.Size())
	http.ServeContent(&rangeProblem{ResponseWriter: w}, r, "", job.FinishedAt, blob)
}

// maxNamedOutputs bounds the outputs a 404 names (pdf-png may make
// hundreds); the job's record lists them all.
const maxNamedOutputs = 20

// noSuchOutput says why the job has no output called name and what it
// does have: its outputs, or that it has none yet or at all.
func noSuchOutput(job ledger.Job, name string) string {
	msg := "the job has no output called " + quoteBounded(name)
	if len(job.Outputs) == 0 {
		if job.State != jobstate.Succeeded {
			return fmt.Sprintf("%s: the job is %s, and only a succeeded job has outputs", msg, job.State)
		}
		return msg + ": it has no outputs"
	}
	names := make([]string, 0, min(len(job.Outputs), maxNamedOutputs))
	for _, o := range job.Outputs[:min(len(job.Outputs), maxNamedOutputs)] {
		names = append(names, o.Name)
	}
	list := strings.Join(names, ", ")
	if more := len(job.Outputs) - len(names); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return fmt.Sprintf("%s; its outputs are %s (GET /v1/jobs/%s lists each with its URL)", msg, list, job.ID)
}

// blobProblem answers an output that could not be opened: past its
// retention (410), or the blob store down (503). A single download and
// outputs.zip answer alike.
func blobProblem(w http.ResponseWriter, name string, err error) {
	if errors.Is(err, queue.ErrNoBlob) {
		problem(w, http.StatusGone, "output_expired", "the output "+strconv.Quote(name)+" is past its retention and was deleted")
		return
	}
	w.Header().Set("Retry-After", "5")
	problem(w, http.StatusServiceUnavailable, "unavailable", "the blob store is unreachable; retry later")
}

// rangeProblem turns http.ServeContent's plain-text 416 into a problem.
type rangeProblem struct {
	http.ResponseWriter
	refused bool
}

func (w *rangeProblem) WriteHeader(status int) {
	if status != http.StatusRequestedRangeNotSatisfiable {
		w.ResponseWriter.WriteHeader(status)
		return
	}
	w.refused = true // Content-Range (bytes */size) stays
	detail := "the Range header asks for no byte of the output; its size is in Content-Range"
	if w.Header().Get("Content-Range") == "" {
		detail = "the Range header is malformed: want bytes=first-last, bytes=first- or bytes=-suffix, several comma-separated"
	}
	problem(w.ResponseWriter, status, "range_not_satisfiable", detail)
}

func (w *rangeProblem) Write(b []byte) (int, error) {
	if w.refused {
		return len(b), nil // ServeContent's own text
	}
	return w.ResponseWriter.Write(b)
}

func (w *rangeProblem) Unwrap() http.ResponseWriter { return w.ResponseWriter }
