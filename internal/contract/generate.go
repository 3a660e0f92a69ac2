package contract

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Generate writes a Go module into dir holding the client oapi-codegen
// makes from root's openapi.yaml (package renderboxapi, client.gen.go),
// with gen/'s go.mod and go.sum so it builds against the pinned runtime.
// root is the repository's top directory. It runs `go tool oapi-codegen`
// in gen/, so the first run downloads the generator from the module proxy.
func Generate(ctx context.Context, root, dir string) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	genDir := filepath.Join(root, "internal", "contract", "gen")
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(genDir, f))
		if err != nil {
			return fmt.Errorf("reading the generator's module: %w", err)
		}
		if f == "go.mod" {
			b = []byte(strings.Replace(string(b), "module github.com/renderbox/renderbox/internal/contract/gen", "module renderboxapi", 1))
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return err
		}
	}
	cmd := exec.CommandContext(ctx, "go", "tool", "oapi-codegen",
		"-config", "oapi-codegen.yaml", "-o", filepath.Join(dir, "client.gen.go"),
		filepath.Join(root, "openapi.yaml"))
	cmd.Dir = genDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("generating the client with oapi-codegen (go tool in %s): %w\n%s", genDir, err, out)
	}
	return nil
}

// Go runs the go command with args in dir (a module Generate wrote), and
// returns its error with the command's output attached.
func Go(ctx context.Context, dir string, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s in %s: %w\n%s", strings.Join(args, " "), dir, err, out)
	}
	return nil
}
