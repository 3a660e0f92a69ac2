//go:build !unit

package apiserver

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/internal/testenv"
)

// The ledger's URL may hold a password: it comes from the environment or
// a file, and a flag value carrying one (which ps shows) is refused.
func TestResolveDB(t *testing.T) {
	dir := t.TempDir()
	file := func(body string) string {
		p := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_", "@", "_").Replace(body)+".url")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const secretURL = "postgres://renderbox:s3cret@db.internal:5432/renderbox?sslmode=verify-full"
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		want    string // the DB it settles on
		wantErr string // a part of the error, "" for none
	}{
		{name: "default", want: "/var/lib/renderbox/api/ledger.db"},
		{name: "sqlite flag", args: []string{"-db", "/srv/l.db"}, want: "/srv/l.db"},
		{name: "url without password", args: []string{"-db", "postgres://renderbox@db/renderbox"}, want: "postgres://renderbox@db/renderbox"},
		{name: "password in the flag", args: []string{"-db", secretURL}, wantErr: "RENDERBOX_DB"},
		{name: "password parameter in the flag", args: []string{"-db", "postgresql://db/renderbox?password=s3cret"}, wantErr: "-db-file"},
		{name: "password in the environment", env: map[string]string{"RENDERBOX_DB": secretURL}, want: secretURL},
		{name: "password in a file", args: []string{"-db-file", file(secretURL + "\n")}, want: secretURL},
		{name: "file from the environment", env: map[string]string{"RENDERBOX_DB_FILE": file(" " + secretURL + " \n# comment\n")}, want: secretURL},
		{name: "file and flag", args: []string{"-db", "/srv/l.db", "-db-file", file(secretURL)}, wantErr: "keep one"},
		{name: "empty file", args: []string{"-db-file", file("")}, wantErr: "empty"},
		{name: "missing file", args: []string{"-db-file", filepath.Join(dir, "none")}, wantErr: "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"RENDERBOX_DB", "RENDERBOX_DB_FILE"} {
				t.Setenv(k, tc.env[k])
			}
			var c Config
			fs := flag.NewFlagSet("api serve", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			c.bind(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := c.settle(fs)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error saying %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("the error shows the password: %v", err)
				}
			case err != nil:
				t.Fatalf("got %v, want nil", err)
			case c.DB != tc.want:
				t.Errorf("DB = %q, want %q", c.DB, tc.want)
			}
		})
	}
}

// Webhook signatures need one master secret on every replica: with a
// PostgreSQL ledger there is no directory to default it to.
func TestWebhookSecretFileNeededWithPostgres(t *testing.T) {
	c := Config{DB: "postgres://db/renderbox", Webhooks: true}
	if _, err := c.webhooks(); err == nil || !strings.Contains(err.Error(), "-webhook-secret-file") {
		t.Errorf("got %v, want an error naming -webhook-secret-file", err)
	}
}

// api keys works on a PostgreSQL ledger whose URL, password and all, is
// in a file.
func TestKeysOnPostgres(t *testing.T) {
	url := testenv.StartPostgres(t).NewDatabase(t)
	f := filepath.Join(t.TempDir(), "db.url")
	if err := os.WriteFile(f, []byte(url+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := keys(ctx, []string{"create", "-db-file", f, "ci"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("keys create: %v", err)
	}
	s, err := ledger.OpenStore(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ks, err := s.ListKeys(ctx)
	if err != nil || len(ks) != 1 || ks[0].Name != "ci" {
		t.Fatalf("keys in the ledger: got %v, %v; want the one named ci", ks, err)
	}
	if err := keys(ctx, []string{"list", "-db", url}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "carries a password") {
		t.Errorf("keys list with the password in -db: got %v, want a refusal", err)
	}
}

// deploy/ is what an operator installs on an API replica of several
// (docs/operations.md, "Several hosts"): the drop-in's command line and environment,
// with api.env and renderbox.env, must give the API the shared ledger, the
// replica's address, the webhook key handed over as a credential and
// Redis with the password handed over as a credential, and nothing on the
// command line but the subcommand.
func TestDeployReplicaSettings(t *testing.T) {
	creds := t.TempDir() // systemd's %d
	env := map[string]string{}
	var execStart []string
	readUnit := func(name string) {
		b, err := os.ReadFile(filepath.Join("..", "..", "deploy", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
				continue
			}
			k, v, _ := strings.Cut(line, "=")
			switch k {
			case "ExecStart":
				execStart = strings.Fields(v) // the empty one resets, the last counts
			case "Environment":
				ek, ev, _ := strings.Cut(strings.ReplaceAll(v, "%d", creds), "=")
				env[ek] = ev
			case "EnvironmentFile", "LoadCredential":
			default:
				if strings.HasPrefix(k, "RENDERBOX_") { // an environment file's line
					env[k] = v
				}
			}
		}
	}
	readUnit("systemd/renderbox-api.service")
	readUnit("renderbox.env")
	readUnit("api.env")
	readUnit("systemd/renderbox-api.service.d/replica.conf")
	if len(execStart) != 2 || execStart[0] != "/usr/local/bin/renderbox-api" || execStart[1] != "serve" {
		t.Fatalf("replica.conf's ExecStart = %q, want the bare serve (every setting from the environment)", execStart)
	}
	for _, k := range []string{"RENDERBOX_DB", "RENDERBOX_ADDR", "RENDERBOX_METRICS_ADDR", "RENDERBOX_REDIS", "RENDERBOX_WEBHOOK_SECRET_FILE", "RENDERBOX_DB_FILE", "RENDERBOX_REDIS_PASSWORD_FILE", "RENDERBOX_PUBLIC_URL"} {
		t.Setenv(k, env[k])
	}
	var c Config
	fs := flag.NewFlagSet("api serve", flag.ContinueOnError)
	c.bind(fs)
	if err := fs.Parse(execStart[2:]); err != nil {
		t.Fatal(err)
	}
	if err := c.settle(fs); err != nil {
		t.Fatal(err)
	}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.DB, "postgres://renderbox:PASSWORD@") || c.Addr != "10.0.0.21:8080" || c.MetricsAddr != "10.0.0.21:9090" ||
		c.WebhookSecretFile != filepath.Join(creds, "webhook.key") || c.PublicURL != "https://render.example.com" {
		t.Errorf("settings from deploy/: db %q, addr %q, metrics %q, webhook key %q, public URL %q", c.DB, c.Addr, c.MetricsAddr, c.WebhookSecretFile, c.PublicURL)
	}
	if err := os.WriteFile(filepath.Join(creds, "redis.password"), []byte("from-the-credential\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ropts, shown, err := c.Redis.Options()
	if err != nil || ropts.Addr != "10.0.0.10:6379" || ropts.Password != "from-the-credential" {
		t.Errorf("Redis from deploy/: %q, %v; want 10.0.0.10:6379 with the credential's password", shown, err)
	}
}

// -public-url is checked before anything is opened: an http(s) URL with a
// host, an optional path prefix, no query or fragment.
func TestPublicURLIsValidated(t *testing.T) {
	t.Setenv("RENDERBOX_DB", filepath.Join(t.TempDir(), "ledger.db"))
	for _, bad := range []string{"render.example.com", "ftp://render.example.com", "https://render.example.com/?a=1", "https://render.example.com/#f", "https://u:p@render.example.com"} {
		var stderr strings.Builder
		if code := Main(context.Background(), []string{"serve", "-public-url", bad}, io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "-public-url") {
			t.Errorf("api serve -public-url %q: exit %d, %q; want 1 naming -public-url", bad, code, stderr.String())
		}
		// serve's log is JSON to its last line: the reason it stopped too.
		if !json.Valid([]byte(stderr.String())) {
			t.Errorf("api serve -public-url %q: %q is not a JSON record", bad, stderr.String())
		}
	}
	if _, err := os.Stat(os.Getenv("RENDERBOX_DB")); err == nil {
		t.Errorf("a refused -public-url made the ledger")
	}
}
