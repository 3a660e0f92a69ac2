//go:build !unit

package worker

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/testenv"
)

// Through a real asynq server: a job that ends failed and one canceled
// before it ran are archived without a "Retry exhausted" warning (their
// "job finished" says how they ended); a task that is broken (its payload
// unreadable) still gets asynq's warning.
func TestNoRetryExhaustedForEndedJobs(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(t, false)})
	t.Cleanup(func() { rdb.Close() })
	var logs testenv.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	q := queue.New(rdb, time.Hour)
	h := &Handler{Queue: q, Logger: log, Name: "test"}
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency: 1, Queues: map[string]int{queue.QueueName: 1}, TaskCheckInterval: 10 * time.Millisecond,
		Logger: asynqLogger{l: log, h: h}, LogLevel: asynq.WarnLevel,
	})
	mux := asynq.NewServeMux()
	mux.Handle(queue.TypeRender, h)
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// No input stored: the job fails ("its input expired").
	if err := q.Enqueue(ctx, queue.Payload{JobID: "job_failed", Renderer: "svg-png", Retention: time.Hour}, time.Minute, 3); err != nil {
		t.Fatal(err)
	}
	if err := q.Cancel(ctx, "job_canceled"); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, queue.Payload{JobID: "job_canceled", Renderer: "svg-png", Retention: time.Hour}, time.Minute, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := asynq.NewClientFromRedisClient(rdb).Enqueue(asynq.NewTask(queue.TypeRender, []byte("{")),
		asynq.Queue(queue.QueueName), asynq.TaskID("broken"), asynq.MaxRetry(3)); err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	testenv.Poll(t, "the three tasks archived", 30*time.Second, func() bool {
		for _, id := range []string{"job_failed", "job_canceled", "broken"} {
			if ti, err := insp.GetTaskInfo(queue.QueueName, id); err != nil || ti.State != asynq.TaskStateArchived {
				return false
			}
		}
		return true
	})
	srv.Shutdown()
	out := logs.String()
	for _, want := range []string{`"msg":"job finished","job_id":"job_failed","renderer":"svg-png","state":"failed","error_code":"internal"`,
		`"msg":"job finished","job_id":"job_canceled","renderer":"svg-png","state":"canceled"`, `"level":"WARN","msg":"Retry exhausted for task id=broken"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the log has no %s:\n%s", want, out)
		}
	}
	for _, job := range []string{"job_failed", "job_canceled"} {
		if strings.Contains(out, "Retry exhausted for task id="+job) {
			t.Errorf("the log says retry exhausted for %s, which was never retried:\n%s", job, out)
		}
	}
}
