package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// addWebhook queues the webhook of job id, which has just ended, if the job
// asked for one. It runs in the transaction that ended the job.
func addWebhook(ctx context.Context, tx *sql.Tx, id string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO webhooks (job_id, url, next_at)
		SELECT id, callback_url, finished_at FROM jobs WHERE id = $1 AND callback_url != ''`, id)
	if err != nil {
		return fmt.Errorf("queue webhook: %w", err)
	}
	return nil
}

const webhookColumns = `w.job_id, w.url, w.state, w.attempts, w.next_at, w.last_status, w.last_error, w.finished_at`

func scanWebhook(row scanner) (Webhook, error) {
	var (
		w        Webhook
		state    string
		next     int64
		status   sql.NullInt64
		finished sql.NullInt64
	)
	if err := row.Scan(&w.JobID, &w.URL, &state, &w.Attempts, &next, &status, &w.LastError, &finished); err != nil {
		return Webhook{}, err
	}
	w.State = WebhookState(state)
	w.NextAt, w.LastStatus, w.FinishedAt = fromNanos(next), int(status.Int64), fromNullNanos(finished)
	if w.State != WebhookPending {
		w.NextAt = time.Time{}
	}
	return w, nil
}

// GetWebhook returns the webhook of owner's job id; see Store.
func (s *sqlStore) GetWebhook(ctx context.Context, owner, id string) (Webhook, error) {
	w, err := scanWebhook(s.r.QueryRowContext(ctx, "SELECT "+webhookColumns+
		" FROM webhooks w JOIN jobs j ON j.id = w.job_id WHERE w.job_id = $1 AND j.owner = $2", id, owner))
	if errors.Is(err, sql.ErrNoRows) {
		return Webhook{}, fmt.Errorf("get webhook of job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Webhook{}, fmt.Errorf("get webhook of job %s: %w", id, err)
	}
	return w, nil
}

// ClaimWebhooks claims due webhooks; see Store. The claim and the attempt
// count are one UPDATE whose rows are locked as they are chosen (SQLite's
// single writer; PostgreSQL's FOR UPDATE SKIP LOCKED), so two deliverers,
// in one process or in two replicas, never hold the same webhook.
func (s *sqlStore) ClaimWebhooks(ctx context.Context, at time.Time, lease time.Duration, limit int) ([]WebhookClaim, error) {
	if limit <= 0 || lease <= 0 {
		return nil, fmt.Errorf("claim webhooks: limit %d and lease %v must be positive: %w", limit, lease, ErrInvalid)
	}
	var claims []WebhookClaim
	err := s.write(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `UPDATE webhooks SET attempts = attempts + 1, next_at = $1
			WHERE job_id IN (SELECT job_id FROM webhooks WHERE state = 'pending' AND next_at <= $2 ORDER BY next_at LIMIT $3 `+s.d.claimLock+`)
			RETURNING job_id`, toNanos(at.Add(lease)), toNanos(at), limit)
		if err != nil {
			return err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		for _, id := range ids {
			w, err := scanWebhook(tx.QueryRowContext(ctx, "SELECT "+webhookColumns+" FROM webhooks w WHERE w.job_id = $1", id))
			if err != nil {
				return err
			}
			j, err := scanJob(tx.QueryRowContext(ctx, "SELECT "+jobColumns+" FROM jobs WHERE id = $1", id))
			if err != nil {
				return err
			}
			claims = append(claims, WebhookClaim{Webhook: w, Job: j})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim webhooks: %w", err)
	}
	return claims, nil
}

// RecordWebhook stores an attempt's outcome; see Store.
func (s *sqlStore) RecordWebhook(ctx context.Context, jobID string, a WebhookAttempt) (bool, error) {
	if a.At.IsZero() {
		a.At = now()
	}
	state, next, finished := WebhookPending, toNanos(a.RetryAt), nullNanos(time.Time{})
	switch {
	case a.Delivered:
		state, next, finished = WebhookDelivered, toNanos(a.At), nullNanos(a.At)
	case a.RetryAt.IsZero():
		state, next, finished = WebhookFailed, toNanos(a.At), nullNanos(a.At)
	}
	status := sql.NullInt64{Int64: int64(a.Status), Valid: a.Status != 0}
	var changed bool
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE webhooks
			SET state = $1, next_at = $2, last_status = $3, last_error = $4, finished_at = $5
			WHERE job_id = $6 AND attempts = $7 AND state = 'pending'`,
			string(state), next, status, storedText(a.Error), finished, jobID, a.Attempt)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		changed = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record webhook attempt %d of job %s: %w", a.Attempt, jobID, err)
	}
	return changed, nil
}
