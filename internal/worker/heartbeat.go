package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/renderbox/renderbox/internal/queue"
)

// Heartbeat tells the fleet this worker is alive: it writes info to Redis
// now and every interval until ctx ends, then removes it, so the API's
// /readyz and GET /v1/workers see a drained worker go at once and a killed
// one go stale. A failed beat (Redis away) is logged once and retried at
// the next tick; it never stops the worker.
func Heartbeat(ctx context.Context, q *queue.Queue, info queue.WorkerInfo, interval time.Duration, log *slog.Logger) {
	failing := false
	beat := func() {
		// Each beat is bounded by the interval, so a Redis that hangs does
		// not stack beats up.
		cctx, cancel := context.WithTimeout(ctx, interval)
		defer cancel()
		err := q.Heartbeat(cctx, info)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			log.Warn("heartbeat failed; retrying every interval", "err", err, "interval_seconds", interval.Seconds())
			failing = true
		case err == nil && failing:
			log.Info("heartbeat sent again")
			failing = false
		}
	}
	beat()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			beat()
		case <-ctx.Done():
			// On a context of its own: ctx has ended.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			if err := q.RemoveWorker(rctx, info.ID); err != nil {
				log.Warn("removing the heartbeat", "err", err)
			}
			return
		}
	}
}
