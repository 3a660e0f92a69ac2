//go:build !unit

package queue

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/testenv/tool"
)

// scripts/redis.sh starts the Redis of `make run` and development: it must
// be bounded (maxmemory, noeviction) and keep its files — every tenant's
// inputs, outputs and options — to its owner.
func TestRedisScriptIsBoundedAndPrivate(t *testing.T) {
	tool.Need(t, "redis-server", "redis-server")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := filepath.Join(t.TempDir(), "redis")
	cmd := exec.Command("bash", "../../scripts/redis.sh")
	cmd.Env = append(os.Environ(), "RENDERBOX_REDIS="+addr, "RENDERBOX_REDIS_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/redis.sh: %v\n%s", err, out)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	// Its own client: rdb is closed by then. Without this the daemonized
	// server outlived every test run.
	t.Cleanup(func() {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		_ = c.Shutdown(context.Background()).Err()
	})

	cfg, err := rdb.ConfigGet(ctx, "maxmemory*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if cfg["maxmemory"] != "1073741824" || cfg["maxmemory-policy"] != "noeviction" {
		t.Errorf("maxmemory %q, policy %q; want 1073741824 (1gb) and noeviction", cfg["maxmemory"], cfg["maxmemory-policy"])
	}
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Save(ctx).Err(); err != nil { // dump.rdb
		t.Fatal(err)
	}
	// Wait for the append-only file to hold the write (everysec).
	time.Sleep(1500 * time.Millisecond)
	n := 0
	err = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s has mode %#o, want %#o", p, got, want)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"dump.rdb", "redis.log", "appendonlydir"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	t.Logf("%d files and directories checked", n)
}
