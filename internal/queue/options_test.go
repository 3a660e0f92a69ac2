package queue

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/testenv"
)

func TestRedisOptions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pwFile := file("pw", "s3cret\n")
	pwCRLF := file("pw-crlf", "s3cret\r\n")
	empty := file("empty", "\n")
	notPEM := file("ca.txt", "not a certificate")
	ca, _, _ := testenv.TLSFiles(t, dir, "127.0.0.1")

	for _, tc := range []struct {
		name                 string
		c                    RedisConfig
		addr, user, password string
		db                   int
		tls                  bool
		serverName           string
		shown                string
	}{
		{name: "default", c: RedisConfig{}, addr: "127.0.0.1:6379", shown: "127.0.0.1:6379"},
		{name: "bare host:port", c: RedisConfig{Addr: "10.0.0.5:6380"}, addr: "10.0.0.5:6380", shown: "10.0.0.5:6380"},
		{name: "url without port", c: RedisConfig{Addr: "redis://redis.internal"}, addr: "redis.internal:6379", shown: "redis://redis.internal"},
		{name: "user and db in the flag", c: RedisConfig{Addr: "redis://renderbox@10.0.0.5:6379/2"}, addr: "10.0.0.5:6379", user: "renderbox", db: 2, shown: "redis://renderbox@10.0.0.5:6379/2"},
		{name: "password in the environment's URL", c: RedisConfig{URL: "redis://renderbox:s3cret@10.0.0.5:6379/1"},
			addr: "10.0.0.5:6379", user: "renderbox", password: "s3cret", db: 1, shown: "redis://renderbox@10.0.0.5:6379/1"},
		{name: "password from the environment", c: RedisConfig{Addr: "10.0.0.5:6379", Password: "s3cret"}, addr: "10.0.0.5:6379", password: "s3cret", shown: "10.0.0.5:6379"},
		{name: "password file, newline trimmed", c: RedisConfig{Addr: "10.0.0.5:6379", PasswordFile: pwFile}, addr: "10.0.0.5:6379", password: "s3cret", shown: "10.0.0.5:6379"},
		{name: "password file, CRLF trimmed", c: RedisConfig{PasswordFile: pwCRLF}, addr: "127.0.0.1:6379", password: "s3cret", shown: "127.0.0.1:6379"},
		{name: "tls", c: RedisConfig{Addr: "rediss://redis.internal:6380"}, addr: "redis.internal:6380", tls: true, serverName: "redis.internal", shown: "rediss://redis.internal:6380"},
		{name: "tls with a CA and a server name", c: RedisConfig{Addr: "rediss://10.0.0.5:6380/3", CAFile: ca, ServerName: "redis.internal"},
			addr: "10.0.0.5:6380", db: 3, tls: true, serverName: "redis.internal", shown: "rediss://10.0.0.5:6380/3"},
		{name: "ipv6", c: RedisConfig{Addr: "redis://[fd00::5]:6379"}, addr: "[fd00::5]:6379", shown: "redis://[fd00::5]:6379"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, shown, err := tc.c.Options()
			if err != nil {
				t.Fatalf("Options: %v", err)
			}
			if o.Addr != tc.addr || o.Username != tc.user || o.Password != tc.password || o.DB != tc.db {
				t.Errorf("got addr %q user %q password %q db %d, want %q %q %q %d", o.Addr, o.Username, o.Password, o.DB, tc.addr, tc.user, tc.password, tc.db)
			}
			if (o.TLSConfig != nil) != tc.tls {
				t.Fatalf("got TLS %v, want %v", o.TLSConfig != nil, tc.tls)
			}
			if tc.tls && o.TLSConfig.ServerName != tc.serverName {
				t.Errorf("got server name %q, want %q", o.TLSConfig.ServerName, tc.serverName)
			}
			if tc.tls && (tc.c.CAFile != "") != (o.TLSConfig.RootCAs != nil) {
				t.Errorf("got RootCAs %v with CA file %q", o.TLSConfig.RootCAs != nil, tc.c.CAFile)
			}
			if shown != tc.shown {
				t.Errorf("got shown %q, want %q", shown, tc.shown)
			}
		})
	}

	for _, tc := range []struct {
		name string
		c    RedisConfig
		want []string // in the error, in order
	}{
		{"password in the flag", RedisConfig{Addr: "redis://renderbox:s3cret@10.0.0.5:6379"},
			[]string{"-redis holds a password", "ps", "RENDERBOX_REDIS_PASSWORD", "-redis-password-file", "RENDERBOX_REDIS_URL"}},
		{"password in the flag, no user", RedisConfig{Addr: "rediss://:s3cret@10.0.0.5:6379"}, []string{"-redis holds a password"}},
		{"flag and URL", RedisConfig{Addr: "10.0.0.5:6379", URL: "redis://10.0.0.6:6379"}, []string{"both -redis", "RENDERBOX_REDIS_URL", "give one"}},
		{"password twice", RedisConfig{URL: "redis://:a@10.0.0.5:6379", Password: "b"}, []string{"more than once", "RENDERBOX_REDIS_URL and RENDERBOX_REDIS_PASSWORD"}},
		{"password file and variable", RedisConfig{Password: "b", PasswordFile: pwFile}, []string{"RENDERBOX_REDIS_PASSWORD and -redis-password-file"}},
		{"missing password file", RedisConfig{PasswordFile: filepath.Join(dir, "nope")}, []string{"reading -redis-password-file", "no such file"}},
		{"empty password file", RedisConfig{PasswordFile: empty}, []string{"is empty"}},
		{"scheme", RedisConfig{Addr: "http://10.0.0.5:6379"}, []string{`scheme "http"`, "redis://"}},
		{"no port", RedisConfig{Addr: "10.0.0.5"}, []string{`"10.0.0.5" is not one of host:port`}},
		{"bad port", RedisConfig{Addr: "redis://10.0.0.5:99999"}, []string{`port "99999"`}},
		{"bad db", RedisConfig{Addr: "redis://10.0.0.5:6379/queue"}, []string{"redis://10.0.0.5:6379: the path is not a database number"}},
		{"query", RedisConfig{Addr: "redis://10.0.0.5:6379?dial_timeout=1s"}, []string{"options after ?", "-redis-* flags"}},
		{"no host", RedisConfig{Addr: "redis://:6379"}, []string{"no host"}},
		{"CA without TLS", RedisConfig{Addr: "redis://10.0.0.5:6379", CAFile: ca}, []string{"-redis-ca-file", "need a rediss:// address"}},
		{"CA not PEM", RedisConfig{Addr: "rediss://10.0.0.5:6379", CAFile: notPEM}, []string{"holds no PEM certificate"}},
		{"URL error hides the password", RedisConfig{URL: "redis://u:s3cret@10.0.0.5:6379/%zz"}, []string{"not a URL"}},
		{"other error hides the password", RedisConfig{URL: "redis://u:s3cret@10.0.0.5:6379/x"}, []string{"redis://10.0.0.5:6379", "database"}},
		{"unencoded # in the password", RedisConfig{URL: "redis://u:s3cret#1@10.0.0.5:6379"}, []string{"not a URL", "%23 for #"}},
		{"unencoded / in the password", RedisConfig{URL: "redis://u@10.0.0.5:6379/s3cret"}, []string{"not a database number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tc.c.Options()
			if err == nil {
				t.Fatalf("got no error, want one saying %q", tc.want)
			}
			msg, rest := err.Error(), err.Error()
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("got %q, want it to say %q (in order: %q)", msg, w, tc.want)
				}
				rest = rest[i+len(w):]
			}
			if strings.Contains(msg, "s3cret") {
				t.Errorf("the error %q shows the password", msg)
			}
		})
	}
}
