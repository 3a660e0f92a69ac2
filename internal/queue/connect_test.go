//go:build !unit

package queue

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/testenv"
)

// A Redis with a password, and one over TLS with a private CA: the options
// reach them, and a wrong password or CA is refused with what to fix.
func TestRedisCredentialsAndTLS(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check := func(c RedisConfig) error {
		o, shown, err := c.Options()
		if err != nil {
			t.Fatal(err)
		}
		o.MaxRetries = -1
		rdb := redis.NewClient(o)
		defer rdb.Close()
		return CheckRedis(ctx, rdb, shown)
	}
	pw := testenv.StartRedis(t, testenv.RedisConfig{Password: "s3cret pass"})
	if err := check(RedisConfig{Addr: pw.Addr, Password: "s3cret pass"}); err != nil {
		t.Errorf("with the password: %v", err)
	}
	for _, tc := range []struct {
		name string
		c    RedisConfig
		want string
	}{
		{"wrong password", RedisConfig{Addr: pw.Addr, Password: "wrong"}, "refused the user and password"},
		{"no password", RedisConfig{Addr: pw.Addr}, "wants a password"},
	} {
		err := check(tc.c)
		if !errors.Is(err, ErrRedisConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want ErrRedisConfig saying %q", tc.name, err, tc.want)
		}
	}

	tl := testenv.StartRedis(t, testenv.RedisConfig{TLS: true, Password: "p"})
	url := "rediss://:p@" + tl.Addr + "/1"
	if err := check(RedisConfig{URL: url, CAFile: tl.CAFile}); err != nil {
		t.Errorf("over TLS with the CA: %v", err)
	}
	other, _, _ := testenv.TLSFiles(t, t.TempDir(), "127.0.0.1")
	for _, tc := range []struct {
		name string
		c    RedisConfig
	}{
		{"the system's roots", RedisConfig{URL: url}},
		{"another CA", RedisConfig{URL: url, CAFile: other}},
		{"another server name", RedisConfig{URL: url, CAFile: tl.CAFile, ServerName: "redis.internal"}},
	} {
		err := check(tc.c)
		if !errors.Is(err, ErrRedisConfig) || !strings.Contains(err.Error(), "-redis-ca-file and -redis-server-name") {
			t.Errorf("%s: got %v, want ErrRedisConfig naming -redis-ca-file and -redis-server-name", tc.name, err)
		}
	}
}
