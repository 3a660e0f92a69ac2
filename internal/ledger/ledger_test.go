//go:build !unit

package ledger_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/jobstate"
	"github.com/renderbox/renderbox/migrations"
)

func newKey(t testing.TB, s ledger.Store, name string) (string, ledger.Key) {
	t.Helper()
	secret, k, err := s.CreateKey(context.Background(), name)
	if err != nil {
		t.Fatalf("CreateKey(%q): %v", name, err)
	}
	return secret, k
}

func newJob(t testing.TB, s ledger.Store, j ledger.Job) ledger.Job {
	t.Helper()
	if j.Renderer == "" {
		j.Renderer = "html-pdf"
	}
	if j.InputSHA256 == "" {
		j.InputSHA256 = strings.Repeat("ab", 32)
		j.InputSize = 42
	}
	got, created, err := s.CreateJob(context.Background(), j)
	if err != nil {
		t.Fatalf("CreateJob: %v", err)
	}
	if !created {
		t.Fatalf("CreateJob: got created=false, want true")
	}
	return got
}

func state(t *testing.T, s ledger.Store, owner, id string) ledger.Job {
	t.Helper()
	j, err := s.GetJob(context.Background(), owner, id)
	if err != nil {
		t.Fatalf("GetJob(%s): %v", id, err)
	}
	return j
}

func TestOpenMigratesAndReopenIsIdempotent(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		ctx := context.Background()
		_, k := newKey(t, s, "before reopen")

		files, err := fs.Glob(migrations.FS, "*.sql")
		if err != nil || len(files) == 0 {
			t.Fatalf("embedded migrations: got %v (err %v), want at least one", files, err)
		}
		db := rawDB(t, dsn)
		applied := func() map[int64]int64 {
			t.Helper()
			rows, err := db.Query("SELECT version, applied_at FROM schema_migrations")
			if err != nil {
				t.Fatalf("read schema_migrations: %v", err)
			}
			defer rows.Close()
			m := map[int64]int64{}
			for rows.Next() {
				var v, at int64
				if err := rows.Scan(&v, &at); err != nil {
					t.Fatal(err)
				}
				m[v] = at
			}
			return m
		}
		first := applied()
		if len(first) != len(files) {
			t.Fatalf("schema_migrations: got %d versions, want %d (one per file %v)", len(first), len(files), files)
		}

		// Open the same database again: nothing is applied twice, data
		// survives.
		s2 := openStore(t, dsn)
		if second := applied(); !reflect.DeepEqual(second, first) {
			t.Errorf("schema_migrations after re-open: got %v, want %v", second, first)
		}
		keys, err := s2.ListKeys(ctx)
		if err != nil || len(keys) != 1 || keys[0].ID != k.ID {
			t.Errorf("ListKeys after re-open: got %v (err %v), want [%s]", keys, err, k.ID)
		}
		for _, table := range []string{"api_keys", "jobs", "webhooks", "schema_migrations"} {
			var n int
			if err := db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
				t.Errorf("table %s: %v", table, err)
			}
		}
	})
}

// Replicas starting together on a new database each apply every
// migration or find it applied: none fails, nothing is applied twice.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	t.Parallel()
	eachDatabase(t, func(t *testing.T, dsn string) {
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := ledger.OpenStore(context.Background(), dsn)
				if err != nil {
					t.Errorf("OpenStore: %v", err)
					return
				}
				s.Close()
			}()
		}
		wg.Wait()
		var n, distinct int
		if err := rawDB(t, dsn).QueryRow("SELECT count(*), count(DISTINCT version) FROM schema_migrations").Scan(&n, &distinct); err != nil {
			t.Fatal(err)
		}
		files, _ := fs.Glob(migrations.FS, "*.sql")
		if n != len(files) || distinct != len(files) {
			t.Errorf("schema_migrations: got %d rows, %d versions; want %d of each", n, distinct, len(files))
		}
	})
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, _ ledger.Store, dsn string) {
		if _, err := rawDB(t, dsn).Exec("INSERT INTO schema_migrations (version, applied_at) VALUES (9999, 0)"); err != nil {
			t.Fatal(err)
		}
		s, err := ledger.OpenStore(context.Background(), dsn)
		if err == nil {
			s.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "upgrade renderbox") {
			t.Fatalf("Open on a newer schema: got %v, want an error saying to upgrade renderbox", err)
		}
	})
}

func TestPing(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		if err := s.Ping(context.Background()); err != nil {
			t.Fatalf("Ping: got %v, want nil", err)
		}
	})
}

func TestKeys(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		ctx := context.Background()

		secret, k := newKey(t, s, "ci")
		if !regexp.MustCompile(`^key_[0-9a-f]{16}$`).MatchString(k.ID) {
			t.Errorf("key id: got %q, want key_<16 hex>", k.ID)
		}
		want := regexp.MustCompile(`^rbx_` + strings.TrimPrefix(k.ID, "key_") + `_[A-Za-z0-9_-]{43}$`)
		if !want.MatchString(secret) {
			t.Errorf("secret: got %q, want %v", secret, want)
		}

		// Only the sha256 of the secret is stored.
		var stored string
		if err := rawDB(t, dsn).QueryRow("SELECT secret_sha256 FROM api_keys WHERE id = $1", k.ID).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(secret))
		if stored != hex.EncodeToString(sum[:]) {
			t.Errorf("stored hash: got %q, want sha256 hex of the secret", stored)
		}

		got, err := s.Authenticate(ctx, secret)
		if err != nil {
			t.Fatalf("Authenticate(good secret): %v", err)
		}
		if got.ID != k.ID || got.Name != "ci" || got.Revoked() {
			t.Errorf("Authenticate: got %+v, want live key %s named ci", got, k.ID)
		}

		otherSecret, other := newKey(t, s, "other")
		toRevoke, revoked := newKey(t, s, "to revoke")
		if err := s.RevokeKey(ctx, revoked.ID); err != nil {
			t.Fatalf("RevokeKey: %v", err)
		}
		if err := s.RevokeKey(ctx, revoked.ID); err != nil {
			t.Errorf("RevokeKey twice: got %v, want nil", err)
		}
		if err := s.RevokeKey(ctx, "key_0000000000000000"); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("RevokeKey(unknown): got %v, want ErrNotFound", err)
		}

		body := secret[len(secret)-43:]
		flip := func(s string, i int) string {
			b := []byte(s)
			if b[i] == 'A' {
				b[i] = 'B'
			} else {
				b[i] = 'A'
			}
			return string(b)
		}
		bad := []struct {
			name, secret string
		}{
			{"empty", ""},
			{"garbage", "hello"},
			{"wrong secret for the id", "rbx_" + strings.TrimPrefix(k.ID, "key_") + "_" + base64.RawURLEncoding.EncodeToString(make([]byte, 32))},
			{"tampered body", flip(secret, len(secret)-5)},
			{"tampered id", "rbx_" + strings.TrimPrefix(other.ID, "key_") + "_" + body},
			{"unknown id", "rbx_0000000000000000_" + body},
			{"uppercase id", strings.ToUpper(secret[:20]) + secret[20:]},
			{"missing prefix", strings.TrimPrefix(secret, "rbx_")},
			{"trailing data", secret + "x"},
			{"truncated", secret[:len(secret)-1]},
			{"bearer prefix left on", "Bearer " + secret},
			{"revoked", toRevoke},
		}
		for _, tc := range bad {
			got, err := s.Authenticate(ctx, tc.secret)
			if !errors.Is(err, ledger.ErrUnauthorized) {
				t.Errorf("Authenticate(%s): got %+v, %v; want ErrUnauthorized", tc.name, got, err)
			}
			if err != nil && strings.Contains(err.Error(), tc.secret) && tc.secret != "" {
				t.Errorf("Authenticate(%s): error %q echoes the secret", tc.name, err)
			}
		}
		if _, err := s.Authenticate(ctx, otherSecret); err != nil {
			t.Errorf("Authenticate(other live key): got %v, want nil", err)
		}

		keys, err := s.ListKeys(ctx)
		if err != nil {
			t.Fatalf("ListKeys: %v", err)
		}
		gotRevoked := map[string]bool{}
		for _, k := range keys {
			gotRevoked[k.ID] = k.Revoked()
		}
		wantRevoked := map[string]bool{k.ID: false, other.ID: false, revoked.ID: true}
		if !reflect.DeepEqual(gotRevoked, wantRevoked) {
			t.Errorf("ListKeys revoked flags: got %v, want %v", gotRevoked, wantRevoked)
		}

		if _, _, err := s.CreateKey(ctx, "  "); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("CreateKey(blank name): got %v, want ErrInvalid", err)
		}
	})
}

// Only a key made admin is one, as Authenticate and ListKeys read it back;
// keys made before admin keys existed are not (migration 0007's default).
func TestAdminKeys(t *testing.T) {
	eachBackend(t, func(t *testing.T, s ledger.Store, _ string) {
		ctx := context.Background()
		plainSecret, plain := newKey(t, s, "tenant")
		adminSecret, admin, err := s.CreateAdminKey(ctx, "ops")
		if err != nil {
			t.Fatalf("CreateAdminKey: %v", err)
		}
		if plain.Admin || !admin.Admin {
			t.Errorf("created: got admin %v and %v, want false and true", plain.Admin, admin.Admin)
		}
		for _, tc := range []struct {
			secret string
			want   bool
		}{{plainSecret, false}, {adminSecret, true}} {
			k, err := s.Authenticate(ctx, tc.secret)
			if err != nil || k.Admin != tc.want {
				t.Errorf("Authenticate(%s): got admin %v (err %v), want %v", k.Name, k.Admin, err, tc.want)
			}
		}
		keys, err := s.ListKeys(ctx)
		if err != nil || len(keys) != 2 || keys[0].Admin || !keys[1].Admin {
			t.Errorf("ListKeys: got %+v (err %v), want tenant not admin, then ops admin", keys, err)
		}
		if _, _, err := s.CreateAdminKey(ctx, " "); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("CreateAdminKey with an empty name: got %v, want ErrInvalid", err)
		}
	})
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		ctx := context.Background()
		_, alice := newKey(t, s, "alice")
		_, bob := newKey(t, s, "bob")
		j := newJob(t, s, ledger.Job{Owner: alice.ID})

		if _, err := s.GetJob(ctx, bob.ID, j.ID); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("GetJob as bob: got %v, want ErrNotFound", err)
		}
		if _, err := s.Cancel(ctx, bob.ID, j.ID); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("Cancel as bob: got %v, want ErrNotFound", err)
		}
		if got := state(t, s, alice.ID, j.ID); got.State != jobstate.Queued {
			t.Errorf("after bob's cancel: got state %s, want queued", got.State)
		}
		jobs, next, err := s.ListJobs(ctx, bob.ID, ledger.ListOptions{})
		if err != nil || len(jobs) != 0 || next != "" {
			t.Errorf("ListJobs as bob: got %d jobs, next %q, err %v; want none", len(jobs), next, err)
		}
		jobs, _, err = s.ListJobs(ctx, alice.ID, ledger.ListOptions{})
		if err != nil || len(jobs) != 1 || jobs[0].ID != j.ID {
			t.Errorf("ListJobs as alice: got %v, err %v; want [%s]", jobs, err, j.ID)
		}
		if _, err := s.GetJob(ctx, alice.ID, "job_missing"); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("GetJob(missing): got %v, want ErrNotFound", err)
		}
	})
}

func TestCreateJob(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		ctx := context.Background()
		_, alice := newKey(t, s, "alice")
		_, bob := newKey(t, s, "bob")

		in := ledger.Job{
			Owner:          alice.ID,
			Renderer:       "svg-png",
			Options:        json.RawMessage(`{"scale":2}`),
			InputSHA256:    strings.Repeat("0f", 32),
			InputSize:      1234,
			CallbackURL:    "https://example.com/hook",
			OutputName:     "invoice-17",
			IdempotencyKey: "order-17",
			RequestID:      "lb-7f3a:42",
			TraceParent:    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			SecretsDigest:  strings.Repeat("5d", 32),
			State:          jobstate.Succeeded, // ignored: jobs start queued
			Attempts:       9,                  // ignored
		}
		first, created, err := s.CreateJob(ctx, in)
		if err != nil || !created {
			t.Fatalf("CreateJob: got created=%v err=%v, want created", created, err)
		}
		if first.State != jobstate.Queued || first.Attempts != 0 || !strings.HasPrefix(first.ID, "job_") {
			t.Errorf("CreateJob: got state %s attempts %d id %q, want queued, 0, job_…", first.State, first.Attempts, first.ID)
		}
		if got := state(t, s, alice.ID, first.ID); !reflect.DeepEqual(got, first) {
			t.Errorf("GetJob: got %+v, want what CreateJob returned %+v", got, first)
		}
		if first.RequestID != in.RequestID || first.OutputName != in.OutputName || first.TraceParent != in.TraceParent || first.SecretsDigest != in.SecretsDigest {
			t.Errorf("CreateJob: got request id %q, output name %q, traceparent %q and secrets digest %q, want %q, %q, %q and %q as given", first.RequestID, first.OutputName, first.TraceParent, first.SecretsDigest, in.RequestID, in.OutputName, in.TraceParent, in.SecretsDigest)
		}

		// Same owner, same idempotency key: the same job, not a new one.
		again, created, err := s.CreateJob(ctx, ledger.Job{Owner: alice.ID, Renderer: "html-pdf", InputSHA256: "x", IdempotencyKey: "order-17"})
		if err != nil || created {
			t.Fatalf("CreateJob again: got created=%v err=%v, want created=false, nil", created, err)
		}
		if !reflect.DeepEqual(again, first) {
			t.Errorf("CreateJob again: got %+v, want the first job %+v", again, first)
		}

		// The key is per owner; no key means no deduplication.
		newJob(t, s, ledger.Job{Owner: bob.ID, IdempotencyKey: "order-17"})
		a := newJob(t, s, ledger.Job{Owner: alice.ID})
		b := newJob(t, s, ledger.Job{Owner: alice.ID})
		if a.ID == b.ID {
			t.Errorf("two jobs without idempotency key: got the same id %s, want two", a.ID)
		}

		bad := []struct {
			name string
			job  ledger.Job
			want error
		}{
			{"no owner", ledger.Job{Renderer: "html-pdf"}, ledger.ErrInvalid},
			{"unknown owner", ledger.Job{Owner: "key_0000000000000000", Renderer: "html-pdf"}, ledger.ErrInvalid},
			{"no renderer", ledger.Job{Owner: alice.ID}, ledger.ErrInvalid},
			{"options not json", ledger.Job{Owner: alice.ID, Renderer: "html-pdf", Options: json.RawMessage(`{`)}, ledger.ErrInvalid},
			{"duplicate id", ledger.Job{ID: a.ID, Owner: alice.ID, Renderer: "html-pdf"}, ledger.ErrConflict},
			{"id not url-safe", ledger.Job{ID: "job/../1", Owner: alice.ID, Renderer: "html-pdf"}, ledger.ErrInvalid},
		}
		for _, tc := range bad {
			if _, _, err := s.CreateJob(ctx, tc.job); !errors.Is(err, tc.want) {
				t.Errorf("CreateJob(%s): got %v, want %v", tc.name, err, tc.want)
			}
		}
	})
}

func TestListJobsPagination(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		ctx := context.Background()
		_, alice := newKey(t, s, "alice")
		_, bob := newKey(t, s, "bob")

		// 45 jobs, three per timestamp so the id tie-break is exercised, with
		// bob's jobs interleaved.
		base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		var want []string // newest first
		for i := range 45 {
			at := base.Add(time.Duration(i/3) * time.Millisecond)
			j := newJob(t, s, ledger.Job{Owner: alice.ID, CreatedAt: at})
			want = append(want, j.ID)
			if i%5 == 0 {
				newJob(t, s, ledger.Job{Owner: bob.ID, CreatedAt: at})
			}
		}
		// Expected order: created_at desc, then id desc.
		all, _, err := s.ListJobs(ctx, alice.ID, ledger.ListOptions{Limit: 100})
		if err != nil || len(all) != 45 {
			t.Fatalf("ListJobs(limit 100): got %d jobs, err %v; want 45", len(all), err)
		}
		for i := 1; i < len(all); i++ {
			p, c := all[i-1], all[i]
			if c.CreatedAt.After(p.CreatedAt) || (c.CreatedAt.Equal(p.CreatedAt) && c.ID >= p.ID) {
				t.Fatalf("order at %d: got %s@%v after %s@%v, want newest first, then id descending", i, c.ID, c.CreatedAt, p.ID, p.CreatedAt)
			}
		}

		var (
			sizes  []int
			seen   = map[string]bool{}
			cursor string
			paged  []string
		)
		for page := 0; ; page++ {
			if page > 5 {
				t.Fatalf("pagination does not end: %d pages", page)
			}
			jobs, next, err := s.ListJobs(ctx, alice.ID, ledger.ListOptions{Limit: 20, Cursor: cursor})
			if err != nil {
				t.Fatalf("ListJobs page %d: %v", page, err)
			}
			sizes = append(sizes, len(jobs))
			for _, j := range jobs {
				if seen[j.ID] {
					t.Errorf("page %d: job %s seen twice", page, j.ID)
				}
				if j.Owner != alice.ID {
					t.Errorf("page %d: job %s owned by %s, want %s", page, j.ID, j.Owner, alice.ID)
				}
				seen[j.ID] = true
				paged = append(paged, j.ID)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if !reflect.DeepEqual(sizes, []int{20, 20, 5}) {
			t.Errorf("page sizes: got %v, want [20 20 5]", sizes)
		}
		var wantOrder []string
		for _, j := range all {
			wantOrder = append(wantOrder, j.ID)
		}
		if !reflect.DeepEqual(paged, wantOrder) {
			t.Errorf("paged order: got %v, want %v", paged, wantOrder)
		}
		if len(seen) != len(want) {
			t.Errorf("distinct jobs over all pages: got %d, want %d", len(seen), len(want))
		}

		// Limits: default 20, capped at 100.
		limits := []struct{ limit, want int }{{0, 20}, {-3, 20}, {7, 7}, {1000, 45}}
		for _, tc := range limits {
			jobs, _, err := s.ListJobs(ctx, alice.ID, ledger.ListOptions{Limit: tc.limit})
			if err != nil || len(jobs) != tc.want {
				t.Errorf("ListJobs(limit %d): got %d jobs (err %v), want %d", tc.limit, len(jobs), err, tc.want)
			}
		}

		// State filter.
		for _, id := range want[:4] {
			if ok, err := s.MarkRunning(ctx, id, time.Now()); err != nil || !ok {
				t.Fatalf("MarkRunning(%s): got %v, %v", id, ok, err)
			}
		}
		if ok, err := s.Finish(ctx, want[0], ledger.FinishOptions{State: jobstate.Succeeded}); err != nil || !ok {
			t.Fatalf("Finish(%s): got %v, %v", want[0], ok, err)
		}
		filters := []struct {
			state jobstate.State
			want  int
		}{{jobstate.Running, 3}, {jobstate.Succeeded, 1}, {jobstate.Queued, 41}, {jobstate.Failed, 0}, {"", 45}}
		for _, tc := range filters {
			n := 0
			cursor := ""
			for {
				jobs, next, err := s.ListJobs(ctx, alice.ID, ledger.ListOptions{State: tc.state, Limit: 10, Cursor: cursor})
				if err != nil {
					t.Fatalf("ListJobs(state %q): %v", tc.state, err)
				}
				for _, j := range jobs {
					if tc.state != "" && j.State != tc.state {
						t.Errorf("ListJobs(state %q): got a %s job", tc.state, j.State)
					}
				}
				n += len(jobs)
				if next == "" {
					break
				}
				cursor = next
			}
			if n != tc.want {
				t.Errorf("ListJobs(state %q): got %d jobs, want %d", tc.state, n, tc.want)
			}
		}
		if _, _, err := s.ListJobs(ctx, alice.ID, ledger.ListOptions{State: "done"}); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("ListJobs(state done): got %v, want ErrInvalid", err)
		}

		badCursors := []string{"!!!", "AAAA", "not base64 at all", base64.RawURLEncoding.EncodeToString([]byte("short")), base64.RawURLEncoding.EncodeToString(make([]byte, 12)), base64.StdEncoding.EncodeToString([]byte("12345678job_1"))}
		for _, c := range badCursors {
			if _, _, err := s.ListJobs(ctx, alice.ID, ledger.ListOptions{Cursor: c}); !errors.Is(err, ledger.ErrBadCursor) {
				t.Errorf("ListJobs(cursor %q): got %v, want ErrBadCursor", c, err)
			}
		}
	})
}

// Jobs created at the same time list by id in byte order on both
// backends, whatever the database's collation: a client may choose ids
// that a collation for people sorts otherwise.
func TestListJobsTiesInByteOrder(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		_, k := newKey(t, s, "ties")
		at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		for _, id := range []string{"job_a", "job-Z", "job_B", "job_0", "Job_1"} {
			newJob(t, s, ledger.Job{ID: id, Owner: k.ID, CreatedAt: at})
		}
		var got []string
		cursor := ""
		for {
			jobs, next, err := s.ListJobs(context.Background(), k.ID, ledger.ListOptions{Limit: 2, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range jobs {
				got = append(got, j.ID)
			}
			if cursor = next; cursor == "" {
				break
			}
		}
		want := []string{"job_a", "job_B", "job_0", "job-Z", "Job_1"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ListJobs: got %v, want %v (id descending, byte order)", got, want)
		}
	})
}
