package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/renderbox/renderbox/jobstate"
)

const jobIDBytes = 16

// maxJobID bounds a job id's length.
const maxJobID = 128

// validJobID reports whether id is 1 to maxJobID characters of
// [A-Za-z0-9_-]: ids travel in URLs and as asynq task ids.
func validJobID(id string) bool {
	if id == "" || len(id) > maxJobID {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// jobColumns is the column list scanJob reads, in order.
const jobColumns = `id, owner, renderer, options, input_sha256, input_size, callback_url,
	idempotency_key, state, error_code, error_message, attempts,
	created_at, started_at, finished_at, outputs, sandbox_mode, limits, input_type, diagnostics, output_name,
	worker, rootfs_digest, request_id, trace_parent, secrets_digest`

// live is the SQL set of non-terminal states: the only ones a job may leave.
const live = `('queued', 'running')`

// CreateJob records j as a queued job; see Store. The owner must be an
// existing key's id. Fields that belong to the job's life (State, error,
// Attempts, StartedAt, FinishedAt, Outputs) are ignored.
func (s *sqlStore) CreateJob(ctx context.Context, j Job) (Job, bool, error) {
	switch {
	case j.Owner == "":
		return Job{}, false, fmt.Errorf("create job: empty owner (pass the authenticated key's id): %w", ErrInvalid)
	case j.Renderer == "":
		return Job{}, false, fmt.Errorf("create job: empty renderer (name one from the catalogue): %w", ErrInvalid)
	case j.InputSize < 0:
		return Job{}, false, fmt.Errorf("create job: negative input size %d: %w", j.InputSize, ErrInvalid)
	}
	if len(j.Options) == 0 {
		j.Options = json.RawMessage(`{}`)
	}
	if len(j.Limits) == 0 {
		j.Limits = json.RawMessage(`{}`)
	}
	if !json.Valid(j.Options) || !json.Valid(j.Limits) {
		return Job{}, false, fmt.Errorf("create job: options or limits are not valid JSON (send a JSON object): %w", ErrInvalid)
	}
	if len(j.Diagnostics) > 0 && (!json.Valid(j.Diagnostics) || j.Diagnostics[0] != '{') {
		return Job{}, false, fmt.Errorf("create job: diagnostics are not a JSON object: %w", ErrInvalid)
	}
	for _, f := range []string{j.Renderer, string(j.Options), string(j.Limits), j.InputSHA256, j.InputType, j.CallbackURL, j.OutputName} {
		if !storableText(f) {
			return Job{}, false, fmt.Errorf("create job: a field holds NUL or invalid UTF-8 (send UTF-8 text): %w", ErrInvalid)
		}
	}
	if err := CheckIdempotencyKey(j.IdempotencyKey); err != nil {
		return Job{}, false, fmt.Errorf("create job: %w", err)
	}
	if j.ID == "" {
		h, err := randomHex(jobIDBytes)
		if err != nil {
			return Job{}, false, fmt.Errorf("create job: %w", err)
		}
		j.ID = "job_" + h
	}
	if !validJobID(j.ID) {
		return Job{}, false, fmt.Errorf("create job: id %q is not 1-%d characters of [A-Za-z0-9_-] (leave Job.ID empty to get a fresh one): %w", j.ID, maxJobID, ErrInvalid)
	}
	if j.CreatedAt.IsZero() {
		j.CreatedAt = now()
	}
	j.CreatedAt = fromNanos(toNanos(j.CreatedAt)) // what a read returns
	j.State, j.ErrorCode, j.ErrorMessage, j.Attempts = jobstate.Queued, "", "", 0
	j.StartedAt, j.FinishedAt, j.Outputs = time.Time{}, time.Time{}, nil

	// Prepared before the transaction: preparing takes a connection, and
	// SQLite's one writer connection is the transaction's.
	stmt, err := s.stmts.get(ctx, s.w, insertJobSQL)
	if err != nil {
		return Job{}, false, fmt.Errorf("create job: %w", err)
	}
	insert := func(ctx context.Context, tx *sql.Tx, j Job) (Job, bool, error) {
		return insertJob(ctx, tx, tx.StmtContext(ctx, stmt), j)
	}
	var created bool
	if s.group != nil {
		j, created, err = s.group.insert(ctx, s.w, j, insert)
	} else {
		err = s.write(ctx, func(tx *sql.Tx) error {
			j, created, err = insert(ctx, tx, j)
			return err
		})
	}
	switch v := s.d.violation(err); {
	case err == nil:
		return j, created, nil
	case v == primaryKeyViolation:
		return Job{}, false, fmt.Errorf("create job %s: id already taken (leave Job.ID empty to get a fresh one): %w", j.ID, ErrConflict)
	case v == foreignKeyViolation:
		return Job{}, false, fmt.Errorf("create job: owner %q is not a known api key (pass the authenticated key's id): %w", j.Owner, ErrInvalid)
	default:
		return Job{}, false, fmt.Errorf("create job: %w", err)
	}
}

// insertJob inserts j in tx with ins (insertJobSQL, prepared for tx), or,
// when its owner already sent its idempotency key, returns that job with
// created false.
func insertJob(ctx context.Context, tx *sql.Tx, ins *sql.Stmt, j Job) (Job, bool, error) {
	diag := "{}"
	if len(j.Diagnostics) > 0 {
		diag = string(j.Diagnostics)
	}
	res, err := ins.ExecContext(ctx,
		j.ID, j.Owner, j.Renderer, string(j.Options), j.InputSHA256, j.InputSize, j.CallbackURL,
		nullString(j.IdempotencyKey), string(jobstate.Queued), toNanos(j.CreatedAt), string(j.Limits), j.InputType, j.OutputName, j.RequestID,
		storedText(diag), j.TraceParent, j.SecretsDigest)
	if err != nil {
		return Job{}, false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return j, true, err
	}
	// The owner already sent this idempotency key: answer with that job.
	j, err = scanJob(tx.QueryRowContext(ctx,
		"SELECT "+jobColumns+" FROM jobs WHERE owner = $1 AND idempotency_key = $2",
		j.Owner, j.IdempotencyKey))
	return j, false, err
}

// insertJobSQL inserts a queued job. DO NOTHING covers only the (owner,
// idempotency_key) constraint; a duplicate id still fails, as it should.
const insertJobSQL = `INSERT INTO jobs
		(id, owner, renderer, options, input_sha256, input_size, callback_url,
		 idempotency_key, state, attempts, created_at, outputs, limits, input_type, output_name, request_id, diagnostics, trace_parent, secrets_digest)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, $10, '[]', $11, $12, $13, $14, $15, $16, $17)
		ON CONFLICT (owner, idempotency_key) DO NOTHING`

// GetJob returns owner's job id. Another key's job is ErrNotFound.
func (s *sqlStore) GetJob(ctx context.Context, owner, id string) (Job, error) {
	j, err := scanJob(s.r.QueryRowContext(ctx,
		"SELECT "+jobColumns+" FROM jobs WHERE id = $1 AND owner = $2", id, owner))
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("get job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Job{}, fmt.Errorf("get job %s: %w", id, err)
	}
	return j, nil
}

// ListJobs returns a page of owner's jobs, newest first (ties broken by id,
// descending), and the cursor of the next page, "" after the last one.
func (s *sqlStore) ListJobs(ctx context.Context, owner string, opts ListOptions) ([]Job, string, error) {
	if owner == "" {
		return nil, "", fmt.Errorf("list jobs: empty owner (pass the authenticated key's id): %w", ErrInvalid)
	}
	limit := opts.Limit
	switch {
	case limit <= 0:
		limit = DefaultListLimit
	case limit > MaxListLimit:
		limit = MaxListLimit
	}

	var (
		where = []string{"owner = $1"}
		args  = []any{owner}
	)
	// arg adds a parameter and returns its placeholder.
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if opts.State != "" {
		if err := checkState(opts.State); err != nil {
			return nil, "", fmt.Errorf("list jobs: %w", err)
		}
		where = append(where, "state = "+arg(string(opts.State)))
	}
	if opts.Cursor != "" {
		c, err := decodeCursor(opts.Cursor)
		if err != nil {
			return nil, "", fmt.Errorf("list jobs: %w", err)
		}
		// Keyset pagination: strictly after the last row of the previous
		// page in (created_at DESC, id DESC) order, so rows inserted
		// meanwhile neither repeat nor shift the page.
		where = append(where, "(created_at, id) < ("+arg(c.createdAt)+", "+arg(c.id)+")")
	}
	// One row more than the page tells whether another page follows.
	// (The query is built before the call: Go leaves unspecified whether
	// args would be read before or after arg appends to it.)
	q := "SELECT " + jobColumns + " FROM jobs WHERE " + strings.Join(where, " AND ") +
		" ORDER BY created_at DESC, id DESC LIMIT " + arg(limit+1)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	jobs := make([]Job, 0, limit+1)
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, "", fmt.Errorf("list jobs: %w", err)
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("list jobs: %w", err)
	}
	if len(jobs) <= limit {
		return jobs, "", nil
	}
	jobs = jobs[:limit]
	last := jobs[limit-1]
	return jobs, encodeCursor(cursor{createdAt: toNanos(last.CreatedAt), id: last.ID}), nil
}

// MarkRunning records the start of an attempt: from queued, or from running
// when a crashed worker's task is retried (asynq is at-least-once). Each call
// that reports true increments Attempts and sets StartedAt. A terminal job —
// canceled while queued, say — is never resurrected: false, nothing changed.
// The same start recorded again (at equal to StartedAt: a result event
// delivered twice, once to a replica that died before acknowledging it) is
// also false and changes nothing, so an attempt is never counted twice.
// A new attempt has no sandbox yet: the last one's mode is cleared.
func (s *sqlStore) MarkRunning(ctx context.Context, id string, at time.Time) (bool, error) {
	if at.IsZero() {
		at = now()
	}
	return s.transition(ctx, id, jobstate.Running,
		"UPDATE jobs SET state = 'running', attempts = attempts + 1, started_at = $1, sandbox_mode = '' WHERE id = $2 AND state IN "+live+
			" AND (started_at IS NULL OR started_at <> $1)",
		toNanos(at), id)
}

// MarkSandbox records the mode of the sandbox that the attempt started at
// started took. Its event may be applied before that attempt's running
// event (a replica failed the one and another applied the other), so it
// records the start too when none as late is recorded, as MarkRunning
// would; the running event then finds its start recorded and changes
// nothing. An attempt given back to the queue, a later attempt and an end
// stand: false, nothing changed. So is the same mode recorded again.
func (s *sqlStore) MarkSandbox(ctx context.Context, id string, started time.Time, mode string) (bool, error) {
	if started.IsZero() || mode == "" {
		return false, fmt.Errorf("mark job %s's sandbox: want its attempt's start and the mode: %w", id, ErrInvalid)
	}
	return s.transition(ctx, id, jobstate.Running, `UPDATE jobs
		SET state = 'running', sandbox_mode = $2,
			attempts = attempts + CASE WHEN started_at IS DISTINCT FROM $1 THEN 1 ELSE 0 END,
			started_at = $1
		WHERE id = $3 AND state IN `+live+` AND (started_at IS NULL OR started_at < $1
			OR state = 'running' AND started_at = $1 AND sandbox_mode <> $2)`,
		toNanos(started), storedText(mode), id)
}

// transition runs update, a guarded UPDATE of job id's row, and reports
// whether it moved the job (to state); false, nil when the guard held it,
// ErrNotFound when there is no such job.
func (s *sqlStore) transition(ctx context.Context, id string, state jobstate.State, update string, args ...any) (bool, error) {
	var moved bool
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, update, args...)
		if err != nil {
			return err
		}
		moved, err = changedOrExists(ctx, tx, res, id)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("mark job %s %s: %w", id, state, err)
	}
	return moved, nil
}

// MarkQueued moves job id from running back to queued when its recorded
// attempt started no later than at. StartedAt stays (the attempt that was
// given back), so that its running event, delivered again, is still
// recognised as recorded by MarkRunning (and by MarkSandbox); its sandbox
// is gone, and so is its mode.
func (s *sqlStore) MarkQueued(ctx context.Context, id string, at time.Time) (bool, error) {
	return s.transition(ctx, id, jobstate.Queued,
		"UPDATE jobs SET state = 'queued', sandbox_mode = '' WHERE id = $1 AND state = 'running' AND started_at <= $2", id, toNanos(at))
}

// Finish moves job id from queued or running to opts.State. Only the first
// of racing Finish and Cancel calls reports true; the others report false
// and change nothing, so a job reaches exactly one terminal state.
func (s *sqlStore) Finish(ctx context.Context, id string, opts FinishOptions) (bool, error) {
	if err := opts.check(); err != nil {
		return false, fmt.Errorf("finish job %s: %w", id, err)
	}
	if opts.State == jobstate.Canceled && opts.ErrorCode == "" {
		opts.ErrorCode = ErrorCodeCanceled
	}
	if opts.At.IsZero() {
		opts.At = now()
	}
	outputs := opts.Outputs
	if outputs == nil {
		outputs = []Output{}
	}
	manifest, err := json.Marshal(outputs)
	if err != nil {
		return false, fmt.Errorf("finish job %s: encode outputs: %w", id, err)
	}
	diag := "{}"
	if len(opts.Diagnostics) > 0 {
		if !json.Valid(opts.Diagnostics) || opts.Diagnostics[0] != '{' {
			return false, fmt.Errorf("finish job %s: diagnostics are not a JSON object: %w", id, ErrInvalid)
		}
		diag = string(opts.Diagnostics)
	}

	var moved bool
	err = s.write(ctx, func(tx *sql.Tx) error {
		// What the API recorded at intake (the inputs it fetched) stays
		// beside what the worker reports.
		var before string
		err := tx.QueryRowContext(ctx, `SELECT diagnostics FROM jobs WHERE id = $1`, id).Scan(&before)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		merged, err := mergeDiagnostics(before, diag)
		if err != nil {
			return err
		}
		// The attempt's start is recorded as MarkRunning would (old
		// values on the right of SET): counted when it differs from the
		// one recorded, left alone when none is given.
		res, err := tx.ExecContext(ctx, `UPDATE jobs
			SET state = $1, error_code = $2, error_message = $3, outputs = $4, finished_at = $5, sandbox_mode = $6, diagnostics = $7,
				worker = $8, rootfs_digest = $9,
				attempts = attempts + CASE WHEN started_at IS DISTINCT FROM COALESCE($11, started_at) THEN 1 ELSE 0 END,
				started_at = COALESCE($11, started_at)
			WHERE id = $10 AND state IN `+live,
			string(opts.State), storedText(opts.ErrorCode), storedText(opts.ErrorMessage), storedText(string(manifest)),
			toNanos(opts.At), storedText(opts.SandboxMode), storedText(merged), storedText(opts.Worker), storedText(opts.RootfsDigest), id,
			nullNanos(opts.StartedAt))
		if err != nil {
			return err
		}
		if moved, err = changedOrExists(ctx, tx, res, id); err != nil || !moved {
			return err
		}
		return addWebhook(ctx, tx, id)
	})
	if err != nil {
		return false, fmt.Errorf("finish job %s as %s: %w", id, opts.State, err)
	}
	return moved, nil
}

// Cancel moves owner's queued or running job to canceled and returns it. A
// job that is already terminal comes back unchanged with ErrConflict; a
// running job's worker learns of the cancel when its Finish reports false.
func (s *sqlStore) Cancel(ctx context.Context, owner, id string) (Job, error) {
	var (
		j     Job
		moved bool
	)
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE jobs
			SET state = 'canceled', error_code = $1, error_message = 'canceled by the client', finished_at = $2
			WHERE id = $3 AND owner = $4 AND state IN `+live,
			ErrorCodeCanceled, toNanos(now()), id, owner)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if moved = n == 1; moved {
			if err := addWebhook(ctx, tx, id); err != nil {
				return err
			}
		}
		j, err = scanJob(tx.QueryRowContext(ctx,
			"SELECT "+jobColumns+" FROM jobs WHERE id = $1 AND owner = $2", id, owner))
		return err
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Job{}, fmt.Errorf("cancel job %s: %w", id, ErrNotFound)
	case err != nil:
		return Job{}, fmt.Errorf("cancel job %s: %w", id, err)
	case !moved:
		return j, fmt.Errorf("cancel job %s: job already %s: %w", id, j.State, ErrConflict)
	}
	return j, nil
}

// changedOrExists reports whether the conditional update res changed job id,
// or ErrNotFound when no such job exists at all.
func changedOrExists(ctx context.Context, tx *sql.Tx, res sql.Result, id string) (bool, error) {
	n, err := res.RowsAffected()
	if err != nil || n == 1 {
		return n == 1, err
	}
	var exists bool
	if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1)", id).Scan(&exists); err != nil {
		return false, err
	}
	if !exists {
		return false, ErrNotFound
	}
	return false, nil
}

type scanner interface{ Scan(dest ...any) error }

func scanJob(row scanner) (Job, error) {
	var (
		j                       Job
		options, state, outputs string
		limits, diagnostics     string
		idem                    sql.NullString
		created                 int64
		started, finished       sql.NullInt64
	)
	err := row.Scan(&j.ID, &j.Owner, &j.Renderer, &options, &j.InputSHA256, &j.InputSize, &j.CallbackURL,
		&idem, &state, &j.ErrorCode, &j.ErrorMessage, &j.Attempts,
		&created, &started, &finished, &outputs, &j.SandboxMode, &limits, &j.InputType, &diagnostics, &j.OutputName,
		&j.Worker, &j.RootfsDigest, &j.RequestID, &j.TraceParent, &j.SecretsDigest)
	if err != nil {
		return Job{}, err
	}
	j.Options, j.Limits = json.RawMessage(options), json.RawMessage(limits)
	if diagnostics != "{}" && diagnostics != "" {
		j.Diagnostics = json.RawMessage(diagnostics)
	}
	j.IdempotencyKey = idem.String
	j.State = jobstate.State(state)
	j.CreatedAt, j.StartedAt, j.FinishedAt = fromNanos(created), fromNullNanos(started), fromNullNanos(finished)
	if err := json.Unmarshal([]byte(outputs), &j.Outputs); err != nil {
		return Job{}, fmt.Errorf("decode outputs of job %s: %w", j.ID, err)
	}
	if len(j.Outputs) == 0 {
		j.Outputs = nil
	}
	return j, nil
}

func nullString(s string) sql.NullString {
	return sql.NullString{String: s, Valid: s != ""}
}

// mergeDiagnostics is the diagnostics a job had with those of its end
// added: each top-level member of end replaces the one of the same name.
func mergeDiagnostics(before, end string) (string, error) {
	if before == "" || before == "{}" {
		return end, nil
	}
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal([]byte(before), &m); err != nil {
		return end, nil // not an object: the end's alone
	}
	add := map[string]json.RawMessage{}
	if err := json.Unmarshal([]byte(end), &add); err != nil {
		return "", err
	}
	for k, v := range add {
		m[k] = v
	}
	b, err := json.Marshal(m)
	return string(b), err
}
