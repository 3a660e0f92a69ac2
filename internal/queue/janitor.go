package queue

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// DeleteExpired deletes the archived tasks (jobs that failed or were
// canceled) archived longer than the retention ago, and returns how many
// it deleted. asynq keeps archived tasks up to 90 days — with the job's
// owner, options and the first line of the renderer's error — whatever
// the task's Retention says; Retention covers only completed tasks, which
// the workers' asynq janitor deletes. Any number of API processes may run
// it.
func (q *Queue) DeleteExpired(ctx context.Context) (int, error) {
	cutoff := time.Now().Add(-q.Retention).Unix()
	ids, err := q.rdb.ZRangeByScore(ctx, "asynq:{"+QueueName+"}:archived", &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(cutoff, 10), Count: 1000,
	}).Result()
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, id := range ids {
		err := q.inspector.DeleteTask(QueueName, id)
		switch {
		case err == nil:
			n++
		case errors.Is(err, asynq.ErrTaskNotFound), errors.Is(err, asynq.ErrQueueNotFound):
		default:
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}
