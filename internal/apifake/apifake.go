// Package apifake is an in-process stand-in for the renderbox API, for the
// unit tests of package client and of the CLI: it answers with the API's
// shapes (openapi.yaml) and the API's own catalogue (api.Catalogue), keeps
// what it was sent, and can be told to refuse or to fail. Jobs render
// nothing: each poll moves a job on (queued, running, running in a
// prebooted sandbox, then its end; a long poll, ?wait= over 1, to the
// end at once), and a
// succeeded job has one output of a few bytes. Tests of what the renderers
// make run against the real stack (internal/e2e).
package apifake

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/renderbox/renderbox/internal/api"
	"github.com/renderbox/renderbox/internal/render"
)

// Server is a running fake API; Close it.
type Server struct {
	*httptest.Server
	Key string

	// Refuse, when set, may answer a request in the API's place: a
	// non-nil Refusal is sent as its problem.
	Refuse func(r *http.Request) *Refusal
	// Fail, when set, names the error code and message a job ends with
	// (failed); "" lets it succeed. By default a first file that begins
	// as a PDF and has no %%EOF fails render_failed.
	Fail func(s Submission) (code, message string)

	mu          sync.Mutex
	submissions []Submission
	jobs        map[string]*job
	n           int
}

// Refusal is an answer that is a problem.
type Refusal struct {
	Status     int
	Code       string
	Detail     string
	RetryAfter string
}

// Submission is what one POST /v1/jobs sent.
type Submission struct {
	Fields map[string]string // renderer, options, then, … as sent
	Files  []File
}

// File is one file part.
type File struct {
	Name string
	Data []byte
}

type job struct {
	sub    Submission
	polls  int
	body   map[string]any
	output []byte
	name   string
}

// Start starts a fake API that takes key.
func Start(key string) *Server {
	s := &Server{Key: key, jobs: map[string]*job{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Submissions returns what was submitted, in order.
func (s *Server) Submissions() []Submission {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Submission(nil), s.submissions...)
}

func problem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status, "code": code, "detail": detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if s.Refuse != nil {
		if p := s.Refuse(r); p != nil {
			if p.RetryAfter != "" {
				w.Header().Set("Retry-After", p.RetryAfter)
			}
			problem(w, p.Status, p.Code, p.Detail)
			return
		}
	}
	if r.Header.Get("Authorization") != "Bearer "+s.Key {
		problem(w, http.StatusUnauthorized, "unauthorized", "a valid API key is required (Authorization: Bearer KEY)")
		return
	}
	switch {
	case r.Method == "GET" && r.URL.Path == "/v1/renderers":
		s.renderers(w)
	case r.Method == "POST" && r.URL.Path == "/v1/jobs":
		s.submit(w, r)
	case r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/v1/jobs/"):
		s.get(w, r)
	default:
		problem(w, http.StatusNotFound, "not_found", "no such route in the fake")
	}
}

func (s *Server) renderers(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, api.Catalogue())
}

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		problem(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "the fake takes multipart/form-data")
		return
	}
	sub := Submission{Fields: map[string]string{}}
	mr := multipart.NewReader(r.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			problem(w, http.StatusBadRequest, "invalid_request", err.Error())
			return
		}
		b, _ := io.ReadAll(p)
		if p.FormName() == "file" {
			// Part.FileName keeps only the base name; the API keeps the path.
			_, cd, _ := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
			sub.Files = append(sub.Files, File{Name: cd["filename"], Data: b})
		} else {
			sub.Fields[p.FormName()] = string(b)
		}
	}
	name := sub.Fields["renderer"]
	rd, err := render.Lookup(name)
	if err != nil {
		problem(w, http.StatusBadRequest, "unknown_renderer", err.Error())
		return
	}
	if o := sub.Fields["options"]; o != "" {
		if err := checkOptions(rd, []byte(o)); err != nil {
			problem(w, http.StatusBadRequest, "invalid_options", err.Error())
			return
		}
	}
	renderers := []string{name}
	if t := sub.Fields["then"]; t != "" {
		var steps []struct {
			Renderer string          `json:"renderer"`
			Options  json.RawMessage `json:"options"`
		}
		if err := json.Unmarshal([]byte(t), &steps); err != nil {
			problem(w, http.StatusBadRequest, "invalid_request", "then: "+err.Error())
			return
		}
		for _, st := range steps {
			rs, err := render.Lookup(st.Renderer)
			if err != nil {
				problem(w, http.StatusBadRequest, "unknown_renderer", err.Error())
				return
			}
			if len(st.Options) > 0 {
				if err := checkOptions(rs, st.Options); err != nil {
					problem(w, http.StatusBadRequest, "invalid_options", err.Error())
					return
				}
			}
			rd = rs
			renderers = append(renderers, st.Renderer)
		}
	}
	if len(sub.Files) == 0 && sub.Fields["download_from"] == "" && sub.Fields["url"] == "" {
		problem(w, http.StatusBadRequest, "invalid_request", "no file")
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.submissions = append(s.submissions, sub)
	s.n++
	id := fmt.Sprintf("job_%032x", s.n)
	ext := strings.TrimPrefix(rd.Output, "application/")
	ext = strings.TrimPrefix(ext, "image/")
	out := "output." + ext
	if n := sub.Fields["output_name"]; n != "" {
		out = n + "." + ext
	}
	j := &job{sub: sub, name: out, output: []byte("fake " + ext + " of " + strings.Join(renderers, "|"))}
	var size int
	for _, f := range sub.Files {
		size += len(f.Data)
	}
	j.body = map[string]any{
		"id": id, "renderer": strings.Join(renderers, "|"), "state": "queued", "attempts": 0,
		"options": map[string]any{}, "input": map[string]any{"sha256": strings.Repeat("0", 64), "size": size},
		"created_at": time.Now().UTC().Format(time.RFC3339Nano), "outputs": []any{},
	}
	s.jobs[id] = j
	w.Header().Set("Location", "/v1/jobs/"+id)
	writeJSON(w, http.StatusAccepted, j.body)
}

// checkOptions refuses an unknown option or a value of the wrong JSON
// type, as the API does (its full checks live in internal/render).
func checkOptions(r *render.Renderer, raw []byte) error {
	opts, err := r.DecodeOptions(raw)
	if err != nil {
		return err
	}
	for _, o := range r.Options {
		v, ok := opts[o.Name]
		if !ok {
			continue
		}
		good := false
		switch x := v.(type) {
		case string:
			good = o.Type == "string"
		case bool:
			good = o.Type == "boolean"
		case float64:
			good = o.Type == "number" || o.Type == "integer" && x == float64(int64(x))
		}
		if !good {
			return fmt.Errorf("option %s: want %s, got %v", o.Name, o.Type, v)
		}
	}
	return nil
}

// damagedPDF fails a job whose first file begins as a PDF and has no
// end, as a renderer of PDFs does.
func damagedPDF(s Submission) (code, message string) {
	if len(s.Files) > 0 && strings.HasPrefix(string(s.Files[0].Data), "%PDF-") && !strings.Contains(string(s.Files[0].Data), "%%EOF") {
		return "render_failed", "the PDF is damaged: no %%EOF"
	}
	return "", ""
}

var refs = regexp.MustCompile(`(?:href|src)="([^"]+)"`)

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1/jobs/")
	id, output, isOutput := strings.Cut(rest, "/outputs/")
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	if j == nil {
		problem(w, http.StatusNotFound, "not_found", "no job "+id)
		return
	}
	if isOutput {
		if j.body["state"] != "succeeded" || output != j.name {
			problem(w, http.StatusNotFound, "not_found", "no output "+output)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(j.output)
		return
	}
	j.polls++
	if wait, _ := strconv.Atoi(r.URL.Query().Get("wait")); wait > 1 && j.polls < 3 {
		// A long poll answers at the end, as the API's does.
		j.polls = 3
	}
	switch j.polls {
	case 1:
		j.body["state"] = "running"
		j.body["attempts"] = 1
		j.body["started_at"] = time.Now().UTC().Format(time.RFC3339Nano)
	case 2:
		j.body["sandbox_mode"] = "prebooted" // the worker took its sandbox
	case 3:
		s.finish(j)
	}
	writeJSON(w, http.StatusOK, j.body)
}

func (s *Server) finish(j *job) {
	j.body["finished_at"] = time.Now().UTC().Format(time.RFC3339Nano)
	j.body["sandbox_mode"] = "prebooted"
	fail := s.Fail
	if fail == nil {
		fail = damagedPDF
	}
	{
		if code, msg := fail(j.sub); code != "" {
			j.body["state"] = "failed"
			j.body["error"] = map[string]any{"code": code, "message": msg}
			return
		}
	}
	j.body["state"] = "succeeded"
	sum := sha256.Sum256(j.output)
	j.body["outputs"] = []any{map[string]any{
		"name": j.name, "media_type": "application/octet-stream", "size": len(j.output),
		"sha256": hex.EncodeToString(sum[:]), "url": "/v1/jobs/" + j.body["id"].(string) + "/outputs/" + j.name,
	}}
	// A page's references to files the job does not have, and to other
	// origins, as Chromium renderers report them.
	if len(j.sub.Files) > 0 && strings.HasSuffix(j.sub.Files[0].Name, ".html") {
		have := map[string]bool{}
		for _, f := range j.sub.Files {
			have[f.Name] = true
		}
		var missing, refused []string
		for _, m := range refs.FindAllStringSubmatch(string(j.sub.Files[0].Data), -1) {
			switch {
			case strings.Contains(m[1], ":"):
				refused = append(refused, m[1])
			case !have[m[1]]:
				missing = append(missing, "http://page.invalid/"+m[1])
			}
		}
		if len(missing)+len(refused) > 0 {
			j.body["diagnostics"] = map[string]any{"missing_files": missing, "refused_requests": refused}
		}
	}
}
