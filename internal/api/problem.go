package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/renderbox/renderbox/internal/render"
)

// problem writes an RFC 9457 problem+json response with a stable code.
func problem(w http.ResponseWriter, status int, code, detail string) {
	problemWith(w, status, code, detail, nil)
}

// problemWith is problem with extension members (RFC 9457 §3.2) beside the
// standard ones.
func problemWith(w http.ResponseWriter, status int, code, detail string, ext map[string]any) {
	body := map[string]any{
		"type": "https://renderbox.dev/problems/" + code, "title": http.StatusText(status),
		"status": status, "detail": detail, "code": code,
	}
	for k, v := range ext {
		if _, taken := body[k]; !taken {
			body[k] = v
		}
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// renderProblem maps a catalogue refusal to its status and code: the one
// place where those errors meet HTTP.
func renderProblem(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, render.ErrInputTooLarge):
		problem(w, http.StatusRequestEntityTooLarge, "input_too_large", err.Error())
	case errors.Is(err, render.ErrUnsupportedInput):
		problem(w, http.StatusBadRequest, "unsupported_input", err.Error())
	case errors.Is(err, render.ErrInvalidInput):
		problem(w, http.StatusBadRequest, "invalid_input", err.Error())
	case errors.Is(err, render.ErrInvalidOptions):
		problem(w, http.StatusBadRequest, "invalid_options", err.Error())
	case errors.Is(err, render.ErrUnknownRenderer):
		problem(w, http.StatusBadRequest, "unknown_renderer", err.Error())
	default:
		problem(w, http.StatusInternalServerError, "internal", "validating the request failed")
	}
}

// intakeProblem answers a submission that could not be read. A refusal in
// the middle of a body closes the connection rather than read the rest.
func intakeProblem(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errBodyTooLarge):
		w.Header().Set("Connection", "close")
		problem(w, http.StatusRequestEntityTooLarge, "input_too_large", err.Error())
	case errors.Is(err, errFieldTooLarge):
		w.Header().Set("Connection", "close")
		problem(w, http.StatusRequestEntityTooLarge, "field_too_large", err.Error())
	case errors.Is(err, render.ErrInputTooLarge):
		w.Header().Set("Connection", "close")
		renderProblem(w, err)
	case errors.Is(err, errUnsupportedMediaType):
		// RFC 9110 §12.5.1: Accept on a response names the types a
		// request to this resource may use.
		w.Header().Set("Accept", "multipart/form-data, application/json")
		problem(w, http.StatusUnsupportedMediaType, "unsupported_media_type", err.Error())
	case errors.Is(err, errBadRequest):
		problem(w, http.StatusBadRequest, "invalid_request", err.Error())
	default:
		renderProblem(w, err)
	}
}
