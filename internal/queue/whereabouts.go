package queue

import (
	"context"
	"errors"
	"time"

	"github.com/hibiken/asynq"
)

// Whereabouts is where the queue holds a job.
type Whereabouts struct {
	// Where is "waiting" (in its key's list), "moving" (on its way into
	// asynq), asynq's state of its task ("pending", "active",
	// "scheduled", "retry", "archived", "completed"), or "" when the
	// queue holds nothing of it.
	Where string
	// Since is when an archived task was archived, and LastErr the
	// error asynq archived it with.
	Since   time.Time
	LastErr string
}

// Whereabouts says where the queue holds job: what the API's reconciler
// compares with the ledger to find jobs the queue lost.
func (q *Queue) Whereabouts(ctx context.Context, job string) (Whereabouts, error) {
	pipe := q.rdb.Pipeline()
	waiting := pipe.HExists(ctx, specsKey, job)
	moving := pipe.HExists(ctx, movingKey, job)
	if _, err := pipe.Exec(ctx); err != nil {
		return Whereabouts{}, err
	}
	switch {
	case waiting.Val():
		return Whereabouts{Where: "waiting"}, nil
	case moving.Val():
		return Whereabouts{Where: "moving"}, nil
	}
	// A job moves only forward (waiting, moving, asynq), and the reads
	// follow it in that order: one that left a place before it was read
	// is found in the next.
	info, err := q.inspector.GetTaskInfo(QueueName, job)
	if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
		return Whereabouts{}, nil
	}
	if err != nil {
		return Whereabouts{}, err
	}
	return Whereabouts{Where: info.State.String(), Since: info.LastFailedAt, LastErr: info.LastErr}, nil
}
