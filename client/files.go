package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// File is one input file: its name (kept in multi-file jobs, where pages
// refer to one another by it: "css/style.css") and how to read it, once
// per attempt.
type File struct {
	Name string
	Open func() (io.ReadCloser, error)
}

// FromPath is the file at path, named by path itself when it is relative
// and stays below the working directory ("css/style.css", with / as the
// separator), else by its base name ("/tmp/x/report.html" is "report.html").
func FromPath(path string) File {
	name := filepath.Base(path)
	if !filepath.IsAbs(path) && filepath.IsLocal(path) {
		name = filepath.ToSlash(filepath.Clean(path))
	}
	return File{Name: name, Open: func() (io.ReadCloser, error) { return os.Open(path) }}
}

// FromDir is the tree under dir as files named by their paths in it,
// index.html first (the page the others belong to) and the rest in
// lexical order; files and directories whose names begin with "." are
// left out, and a symbolic link is an error. dir must have an index.html.
func FromDir(dir string) ([]File, error) {
	var files []File
	entry := -1
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("renderbox: %s is not a regular file", p)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "index.html" {
			entry = len(files)
		}
		files = append(files, File{Name: filepath.ToSlash(rel), Open: func() (io.ReadCloser, error) { return os.Open(p) }})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if entry < 0 {
		return nil, fmt.Errorf("renderbox: %s has no index.html, the page a directory is sent for", dir)
	}
	files[0], files[entry] = files[entry], files[0]
	rest := files[1:]
	sort.Slice(rest, func(i, j int) bool { return rest[i].Name < rest[j].Name })
	return files, nil
}

// FromBytes is a file held in memory.
func FromBytes(name string, b []byte) File {
	return File{Name: name, Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }}
}

// localError is a local file that could not be read while sending.
type localError struct{ err error }

func (e *localError) Error() string { return e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

// writeForm writes the multipart body: the renderer first (the API then
// bounds the input by that renderer's limit as it arrives), then the
// fields, then the files.
func writeForm(mw *multipart.Writer, req Request) error {
	fields := [][2]string{{"renderer", req.Renderer}}
	if req.InputType != "" {
		fields = append(fields, [2]string{"input_type", req.InputType})
	}
	for _, f := range []struct {
		name string
		v    any
		set  bool
	}{
		{"options", req.Options, len(req.Options) > 0},
		{"limits", req.Limits, len(req.Limits) > 0},
		{"then", req.Then, len(req.Then) > 0},
		{"download_from", req.DownloadFrom, len(req.DownloadFrom) > 0},
	} {
		if f.set {
			b, err := json.Marshal(f.v)
			if err != nil {
				return &localError{fmt.Errorf("renderbox: %s: %w", f.name, err)}
			}
			fields = append(fields, [2]string{f.name, string(b)})
		}
	}
	if req.URL != "" {
		fields = append(fields, [2]string{"url", req.URL})
	}
	if req.CallbackURL != "" {
		fields = append(fields, [2]string{"callback_url", req.CallbackURL})
	}
	if req.OutputName != "" {
		fields = append(fields, [2]string{"output_name", req.OutputName})
	}
	for _, f := range fields {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			return err
		}
	}
	for _, f := range req.Files {
		r, err := f.Open()
		if err != nil {
			return &localError{fmt.Errorf("renderbox: %s: %w", f.Name, err)}
		}
		w, err := mw.CreateFormFile("file", f.Name)
		if err == nil {
			_, err = copyFile(w, r)
		}
		r.Close()
		if err != nil {
			return err
		}
	}
	return mw.Close()
}

// copyFile copies r to w, a read error marked local (a write error is
// the connection's).
func copyFile(w io.Writer, r io.Reader) (int64, error) {
	var n int64
	buf := make([]byte, 32<<10)
	for {
		k, rerr := r.Read(buf)
		if k > 0 {
			if _, err := w.Write(buf[:k]); err != nil {
				return n, err
			}
			n += int64(k)
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, &localError{rerr}
		}
	}
}
