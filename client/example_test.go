package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/renderbox/renderbox/client"
	"github.com/renderbox/renderbox/internal/apifake"
)

// exampleServer is the API the examples talk to: the one named by
// RENDERBOX_EXAMPLE_SERVER and RENDERBOX_EXAMPLE_KEY (internal/e2e's
// TestClientExamples runs them so, against a live stack), else an
// in-process stand-in that answers with the same shapes. Their output is
// the same either way.
func exampleServer() (server, key string, stop func()) {
	if s := os.Getenv("RENDERBOX_EXAMPLE_SERVER"); s != "" {
		return s, os.Getenv("RENDERBOX_EXAMPLE_KEY"), func() {}
	}
	api := apifake.Start("rb_example")
	return api.URL, api.Key, api.Close
}

// Submit a page, wait for its PDF and download it.
func Example() {
	server, key, stop := exampleServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	c, err := client.New(server, key)
	if err != nil {
		fmt.Println(err)
		return
	}
	job, err := c.Submit(ctx, client.Request{
		Renderer:   "html-pdf",
		Files:      []client.File{client.FromBytes("report.html", []byte("<h1>Quarterly figures</h1>"))},
		Options:    map[string]any{"paper": "a4"},
		OutputName: "report",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	job, err = c.Wait(ctx, job.ID, nil) // a *client.JobError if it failed
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, _ := os.MkdirTemp("", "renderbox-example-")
	defer os.RemoveAll(dir)
	paths, err := c.DownloadAll(ctx, job, dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(job.State, filepath.Base(paths[0]))
	// Output: succeeded report.pdf
}

// A page with its stylesheet and image, sent under the paths the page
// uses (client.FromDir sends a directory so, and client.FromPath keeps a
// relative path): nothing is missing from the PDF.
func Example_multiFileHTML() {
	server, key, stop := exampleServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	c, err := client.New(server, key)
	if err != nil {
		fmt.Println(err)
		return
	}
	page := `<!doctype html><link rel="stylesheet" href="css/style.css"><h1>Hello</h1><img src="img/dot.svg">`
	job, err := c.Submit(ctx, client.Request{Renderer: "html-pdf", Files: []client.File{
		client.FromBytes("index.html", []byte(page)), // the page first
		client.FromBytes("css/style.css", []byte("h1 { color: rgb(200, 0, 0) }")),
		client.FromBytes("img/dot.svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>`)),
	}})
	if err == nil {
		job, err = c.Wait(ctx, job.ID, nil)
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(job.State, "diagnostics:", len(job.Diagnostics) > 0)
	// Output: succeeded diagnostics: false
}

// A chain: the page to a PDF, then the PDF protected with a password; a
// job that fails is a *client.JobError carrying its code.
func Example_chain() {
	server, key, stop := exampleServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	c, err := client.New(server, key)
	if err != nil {
		fmt.Println(err)
		return
	}
	job, err := c.Submit(ctx, client.Request{
		Renderer: "html-pdf",
		Files:    []client.File{client.FromBytes("letter.html", []byte("<p>Private</p>"))},
		Then: []client.Step{{Renderer: "pdf-protect", Options: map[string]any{
			"user_password": "open sesame", "owner_password": "keep out"}}},
	})
	if err == nil {
		job, err = c.Wait(ctx, job.ID, nil)
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(job.Renderer, job.State)

	// A damaged PDF fails its job.
	job, err = c.Submit(ctx, client.Request{Renderer: "pdf-png", Files: []client.File{
		client.FromBytes("broken.pdf", []byte("%PDF-1.4\n1 0 obj <<"))}})
	if err == nil {
		_, err = c.Wait(ctx, job.ID, nil)
	}
	var failed *client.JobError
	if errors.As(err, &failed) {
		fmt.Println(failed.Job.State, failed.Code)
	}
	// Output:
	// html-pdf|pdf-protect succeeded
	// failed render_failed
}
