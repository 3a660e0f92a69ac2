//go:build !unit

package ledger_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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
		if first.RequestID != in.RequestID || first.OutputName != in.OutputName {
			t.Errorf("CreateJob: got request id %q and output name %q, want %q and %q as given", first.RequestID, first.OutputName, in.RequestID, in.OutputName)
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

func TestMarkRunningNeverResurrects(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		ctx := context.Background()
		_, k := newKey(t, s, "worker test")

		j := newJob(t, s, ledger.Job{Owner: k.ID})
		t1 := time.Date(2025, 2, 1, 10, 0, 0, 0, time.UTC)
		if ok, err := s.MarkRunning(ctx, j.ID, t1); err != nil || !ok {
			t.Fatalf("MarkRunning(queued): got %v, %v; want true", ok, err)
		}
		// A retry after a worker crash: running -> running, another attempt.
		t2 := t1.Add(time.Minute)
		if ok, err := s.MarkRunning(ctx, j.ID, t2); err != nil || !ok {
			t.Fatalf("MarkRunning(running): got %v, %v; want true", ok, err)
		}
		// The second start's event delivered again (a replica applied it
		// and died before acknowledging): the same start, not a third.
		if ok, err := s.MarkRunning(ctx, j.ID, t2); err != nil || ok {
			t.Fatalf("MarkRunning(the same start again): got %v, %v; want false, nil", ok, err)
		}
		got := state(t, s, k.ID, j.ID)
		if got.State != jobstate.Running || got.Attempts != 2 || !got.StartedAt.Equal(t2) {
			t.Errorf("after two starts, one recorded twice: got %s, attempts %d, started %v; want running, 2, %v", got.State, got.Attempts, got.StartedAt, t2)
		}

		if _, err := s.MarkRunning(ctx, "job_missing", t1); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("MarkRunning(missing): got %v, want ErrNotFound", err)
		}

		terminal := []ledger.FinishOptions{
			{State: jobstate.Succeeded},
			{State: jobstate.Failed, ErrorCode: "timeout", ErrorMessage: "render took longer than 30s"},
			{State: jobstate.Canceled},
		}
		for _, fin := range terminal {
			for _, startFirst := range []bool{false, true} {
				j := newJob(t, s, ledger.Job{Owner: k.ID})
				if startFirst {
					if ok, err := s.MarkRunning(ctx, j.ID, t1); err != nil || !ok {
						t.Fatalf("MarkRunning: got %v, %v", ok, err)
					}
				}
				if ok, err := s.Finish(ctx, j.ID, fin); err != nil || !ok {
					t.Fatalf("Finish(%s): got %v, %v; want true", fin.State, ok, err)
				}
				before := state(t, s, k.ID, j.ID)
				if ok, err := s.MarkRunning(ctx, j.ID, t2); err != nil || ok {
					t.Errorf("MarkRunning(%s): got %v, %v; want false, nil", fin.State, ok, err)
				}
				if after := state(t, s, k.ID, j.ID); !reflect.DeepEqual(after, before) {
					t.Errorf("MarkRunning(%s) changed the job: got %+v, want %+v", fin.State, after, before)
				}
			}
		}
	})
}

// An end applied before its attempt's start — the replica holding the
// running event died unacknowledged, another applied the end — counts the
// attempt from the end's StartedAt; the start delivered again afterwards,
// or the same start given twice, counts nothing more.
func TestFinishCountsAnUnrecordedStart(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		ctx := context.Background()
		_, k := newKey(t, s, "finish before start")
		t1 := time.Date(2025, 2, 1, 10, 0, 0, 0, time.UTC)
		t2 := t1.Add(time.Minute)
		for _, tc := range []struct {
			name     string
			starts   []time.Time // MarkRunning before Finish
			started  time.Time   // FinishOptions.StartedAt
			attempts int
		}{
			{"no start recorded", nil, t1, 1},
			{"its start recorded", []time.Time{t1}, t1, 1},
			{"an earlier attempt's start recorded", []time.Time{t1}, t2, 2},
			{"both starts recorded", []time.Time{t1, t2}, t2, 2},
			{"no attempt (canceled while queued)", nil, time.Time{}, 0},
			{"an end that names no start", []time.Time{t1}, time.Time{}, 1},
		} {
			j := newJob(t, s, ledger.Job{Owner: k.ID})
			for _, at := range tc.starts {
				if ok, err := s.MarkRunning(ctx, j.ID, at); err != nil || !ok {
					t.Fatalf("%s: MarkRunning(%v): got %v, %v", tc.name, at, ok, err)
				}
			}
			if ok, err := s.Finish(ctx, j.ID, ledger.FinishOptions{State: jobstate.Succeeded, StartedAt: tc.started}); err != nil || !ok {
				t.Fatalf("%s: Finish: got %v, %v; want true", tc.name, ok, err)
			}
			if ok, err := s.MarkRunning(ctx, j.ID, tc.started); err != nil || ok {
				t.Errorf("%s: the start delivered after the end: got %v, %v; want false, nil", tc.name, ok, err)
			}
			got := state(t, s, k.ID, j.ID)
			wantStart := tc.started
			if wantStart.IsZero() && len(tc.starts) > 0 {
				wantStart = tc.starts[len(tc.starts)-1]
			}
			if got.State != jobstate.Succeeded || got.Attempts != tc.attempts || !got.StartedAt.Equal(wantStart) {
				t.Errorf("%s: got %s, attempts %d, started %v; want succeeded, %d, %v", tc.name, got.State, got.Attempts, got.StartedAt, tc.attempts, wantStart)
			}
		}
	})
}

func TestFinish(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		ctx := context.Background()
		_, k := newKey(t, s, "finish test")
		j := newJob(t, s, ledger.Job{Owner: k.ID})

		bad := []struct {
			name string
			opts ledger.FinishOptions
		}{
			{"not terminal", ledger.FinishOptions{State: jobstate.Running}},
			{"no state", ledger.FinishOptions{}},
			{"failed without code", ledger.FinishOptions{State: jobstate.Failed}},
			{"succeeded with code", ledger.FinishOptions{State: jobstate.Succeeded, ErrorCode: "internal"}},
		}
		for _, tc := range bad {
			if ok, err := s.Finish(ctx, j.ID, tc.opts); ok || !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("Finish(%s): got %v, %v; want false, ErrInvalid", tc.name, ok, err)
			}
		}
		if ok, err := s.Finish(ctx, "job_missing", ledger.FinishOptions{State: jobstate.Succeeded}); ok || !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("Finish(missing): got %v, %v; want false, ErrNotFound", ok, err)
		}

		at := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
		outputs := []ledger.Output{
			{Name: "page-1.png", Size: 2048, SHA256: strings.Repeat("1", 64), MediaType: "image/png"},
			{Name: "page-2.png", Size: 4096, SHA256: strings.Repeat("2", 64), MediaType: "image/png"},
		}
		rootfs := strings.Repeat("9f", 32)
		if ok, err := s.Finish(ctx, j.ID, ledger.FinishOptions{State: jobstate.Succeeded, Outputs: outputs, At: at,
			Worker: "render-1", RootfsDigest: rootfs}); err != nil || !ok {
			t.Fatalf("Finish: got %v, %v; want true", ok, err)
		}
		got := state(t, s, k.ID, j.ID)
		if got.State != jobstate.Succeeded || !got.FinishedAt.Equal(at) || !reflect.DeepEqual(got.Outputs, outputs) {
			t.Errorf("after Finish: got %s at %v outputs %v; want succeeded at %v outputs %v", got.State, got.FinishedAt, got.Outputs, at, outputs)
		}
		if got.Worker != "render-1" || got.RootfsDigest != rootfs {
			t.Errorf("after Finish: worker %q on rootfs %q; want render-1 on %s", got.Worker, got.RootfsDigest, rootfs)
		}

		// The second finish loses and changes nothing.
		if ok, err := s.Finish(ctx, j.ID, ledger.FinishOptions{State: jobstate.Failed, ErrorCode: "internal"}); err != nil || ok {
			t.Errorf("second Finish: got %v, %v; want false, nil", ok, err)
		}
		if again := state(t, s, k.ID, j.ID); !reflect.DeepEqual(again, got) {
			t.Errorf("second Finish changed the job: got %+v, want %+v", again, got)
		}
	})
}

// What the API recorded when it took the job (the inputs it fetched) is
// kept when the worker's end brings diagnostics of its own.
func TestFinishKeepsIntakeDiagnostics(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		ctx := context.Background()
		_, k := newKey(t, s, "diagnostics test")
		if _, _, err := s.CreateJob(ctx, ledger.Job{Owner: k.ID, Renderer: "x", Diagnostics: json.RawMessage(`[1]`)}); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("CreateJob with diagnostics [1]: %v, want ErrInvalid", err)
		}
		fetched := `{"fetched":[{"url":"https://example.com/a.docx","status":200,"bytes":5,"ms":1}]}`
		for _, end := range []string{"", `{"console_errors":["boom"]}`} {
			j := newJob(t, s, ledger.Job{Owner: k.ID, Diagnostics: json.RawMessage(fetched)})
			if got := state(t, s, k.ID, j.ID); string(got.Diagnostics) != fetched {
				t.Errorf("queued job's diagnostics %s, want %s", got.Diagnostics, fetched)
			}
			if ok, err := s.Finish(ctx, j.ID, ledger.FinishOptions{State: jobstate.Succeeded, Diagnostics: json.RawMessage(end)}); err != nil || !ok {
				t.Fatalf("Finish: %v %v", ok, err)
			}
			var got map[string]any
			if err := json.Unmarshal(state(t, s, k.ID, j.ID).Diagnostics, &got); err != nil || got["fetched"] == nil || (end != "" && got["console_errors"] == nil) {
				t.Errorf("after Finish with %q: %v %v", end, got, err)
			}
		}
	})
}

func TestCancel(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		ctx := context.Background()
		_, k := newKey(t, s, "cancel test")

		queued := newJob(t, s, ledger.Job{Owner: k.ID})
		running := newJob(t, s, ledger.Job{Owner: k.ID})
		if ok, err := s.MarkRunning(ctx, running.ID, time.Now()); err != nil || !ok {
			t.Fatalf("MarkRunning: got %v, %v", ok, err)
		}
		for _, j := range []ledger.Job{queued, running} {
			got, err := s.Cancel(ctx, k.ID, j.ID)
			if err != nil {
				t.Fatalf("Cancel(%s): %v", j.ID, err)
			}
			if got.State != jobstate.Canceled || got.ErrorCode != "canceled" || got.FinishedAt.IsZero() {
				t.Errorf("Cancel(%s): got %s, code %q, finished %v; want canceled, canceled, set", j.ID, got.State, got.ErrorCode, got.FinishedAt)
			}
			// Canceling again: the job comes back unchanged, with ErrConflict.
			again, err := s.Cancel(ctx, k.ID, j.ID)
			if !errors.Is(err, ledger.ErrConflict) || !reflect.DeepEqual(again, got) {
				t.Errorf("Cancel twice: got %+v, %v; want the canceled job and ErrConflict", again, err)
			}
		}

		done := newJob(t, s, ledger.Job{Owner: k.ID})
		if ok, err := s.Finish(ctx, done.ID, ledger.FinishOptions{State: jobstate.Succeeded}); err != nil || !ok {
			t.Fatalf("Finish: got %v, %v", ok, err)
		}
		got, err := s.Cancel(ctx, k.ID, done.ID)
		if !errors.Is(err, ledger.ErrConflict) || got.State != jobstate.Succeeded {
			t.Errorf("Cancel(succeeded): got %s, %v; want succeeded, ErrConflict", got.State, err)
		}
	})
}

// TestExactlyOneTerminalState races workers finishing a job against clients
// canceling it: exactly one call wins, and the job ends in the winner's state.
func TestExactlyOneTerminalState(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		ctx := context.Background()
		_, k := newKey(t, s, "race")

		for _, startFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("running=%v", startFirst), func(t *testing.T) {
				j := newJob(t, s, ledger.Job{Owner: k.ID})
				if startFirst {
					if ok, err := s.MarkRunning(ctx, j.ID, time.Now()); err != nil || !ok {
						t.Fatalf("MarkRunning: got %v, %v", ok, err)
					}
				}
				const racers = 20
				var (
					start   = make(chan struct{})
					wg      sync.WaitGroup
					mu      sync.Mutex
					winners []jobstate.State
				)
				for i := range racers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						var (
							won  bool
							as   jobstate.State
							err  error
							opts ledger.FinishOptions
						)
						switch i % 4 {
						case 0:
							_, err = s.Cancel(ctx, k.ID, j.ID)
							won, as = err == nil, jobstate.Canceled
							if errors.Is(err, ledger.ErrConflict) {
								err = nil
							}
						case 1:
							opts = ledger.FinishOptions{State: jobstate.Succeeded}
						case 2:
							opts = ledger.FinishOptions{State: jobstate.Failed, ErrorCode: "sandbox_failure"}
						case 3:
							opts = ledger.FinishOptions{State: jobstate.Canceled}
						}
						if opts.State != "" {
							won, err = s.Finish(ctx, j.ID, opts)
							as = opts.State
						}
						if err != nil {
							t.Errorf("racer %d: %v", i, err)
						}
						if won {
							mu.Lock()
							winners = append(winners, as)
							mu.Unlock()
						}
					}()
				}
				close(start)
				wg.Wait()
				if len(winners) != 1 {
					t.Fatalf("winners: got %d (%v), want exactly 1", len(winners), winners)
				}
				if got := state(t, s, k.ID, j.ID); got.State != winners[0] {
					t.Errorf("final state: got %s, want the winner's %s", got.State, winners[0])
				}
			})
		}
	})
}

// TestConcurrentWriters runs writers on two stores over the same file (as
// two processes would) alongside readers: nothing fails with "database is
// locked" and nothing is lost.
func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s1 ledger.Store, dsn string) {
		ctx := context.Background()
		s2 := openStore(t, dsn)
		_, k := newKey(t, s1, "load")

		const writers, perWriter = 8, 25
		var wg sync.WaitGroup
		for w := range writers {
			store := ledger.Store(s1)
			if w%2 == 1 {
				store = s2
			}
			wg.Add(2)
			go func() {
				defer wg.Done()
				for i := range perWriter {
					j, _, err := store.CreateJob(ctx, ledger.Job{Owner: k.ID, Renderer: "dot-svg", InputSHA256: "x"})
					if err != nil {
						t.Errorf("writer %d job %d: CreateJob: %v", w, i, err)
						return
					}
					if _, err := store.MarkRunning(ctx, j.ID, time.Now()); err != nil {
						t.Errorf("writer %d job %d: MarkRunning: %v", w, i, err)
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				for range perWriter {
					if _, _, err := store.ListJobs(ctx, k.ID, ledger.ListOptions{Limit: 5}); err != nil {
						t.Errorf("reader %d: ListJobs: %v", w, err)
						return
					}
				}
			}()
		}
		wg.Wait()

		n := 0
		cursor := ""
		for {
			jobs, next, err := s1.ListJobs(ctx, k.ID, ledger.ListOptions{State: jobstate.Running, Limit: 100, Cursor: cursor})
			if err != nil {
				t.Fatalf("ListJobs: %v", err)
			}
			n += len(jobs)
			if next == "" {
				break
			}
			cursor = next
		}
		if n != writers*perWriter {
			t.Errorf("running jobs: got %d, want %d", n, writers*perWriter)
		}
	})
}

// A drained worker gives its attempt back: the job is queued again, unless
// a later attempt or an end is already recorded; the given-back attempt's
// start, delivered again, does not count twice.
func TestMarkQueued(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s ledger.Store, dsn string) {
		ctx := context.Background()
		_, k := newKey(t, s, "drain")
		j := newJob(t, s, ledger.Job{Owner: k.ID})
		t1 := time.Now().UTC().Truncate(time.Microsecond)
		state := func() ledger.Job {
			got, err := s.GetJob(ctx, k.ID, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		if ok, err := s.MarkQueued(ctx, j.ID, t1); ok || err != nil {
			t.Errorf("MarkQueued of a job never started: %v %v, want false", ok, err)
		}
		if ok, err := s.MarkRunning(ctx, j.ID, t1); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if ok, err := s.MarkQueued(ctx, j.ID, t1.Add(-time.Second)); ok || err != nil || state().State != jobstate.Running {
			t.Errorf("a give-back older than the recorded start: %v %v, state %s; want false, running", ok, err, state().State)
		}
		if ok, err := s.MarkQueued(ctx, j.ID, t1.Add(time.Second)); !ok || err != nil {
			t.Fatalf("MarkQueued: %v %v", ok, err)
		}
		if got := state(); got.State != jobstate.Queued || got.Attempts != 1 || !got.StartedAt.Equal(t1) {
			t.Errorf("after the give-back: %s, %d attempts, started %v; want queued, 1, %v", got.State, got.Attempts, got.StartedAt, t1)
		}
		if ok, err := s.MarkRunning(ctx, j.ID, t1); ok || err != nil || state().State != jobstate.Queued {
			t.Errorf("the given-back start again: %v %v, state %s; want false, queued", ok, err, state().State)
		}
		if ok, err := s.MarkRunning(ctx, j.ID, t1.Add(2*time.Second)); !ok || err != nil || state().Attempts != 2 {
			t.Errorf("the next attempt: %v %v, %d attempts; want true, 2", ok, err, state().Attempts)
		}
		if _, err := s.Finish(ctx, j.ID, ledger.FinishOptions{State: jobstate.Succeeded}); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.MarkQueued(ctx, j.ID, time.Now().Add(time.Minute)); ok || err != nil || state().State != jobstate.Succeeded {
			t.Errorf("MarkQueued after the end: %v %v, state %s", ok, err, state().State)
		}
		if _, err := s.MarkQueued(ctx, "job_none", time.Now()); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("an unknown job: %v, want ErrNotFound", err)
		}
	})
}
