package worker

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

func TestWithRedis(t *testing.T) {
	h := &Handler{}
	log := slog.New(slog.DiscardHandler)
	down := errors.New("dial tcp: connection refused")

	t.Run("waits out an outage", func(t *testing.T) {
		calls := 0
		err := h.withRedis(context.Background(), log, "storing", func(context.Context) error {
			if calls++; calls < 4 {
				return down
			}
			return nil
		})
		if err != nil || calls != 4 {
			t.Errorf("got %v after %d calls, want success on the 4th", err, calls)
		}
	})

	t.Run("gives up when the attempt ends", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		err := h.withRedis(ctx, log, "storing", func(context.Context) error { return down })
		if !errors.Is(err, down) || time.Since(t0) > 2*time.Second {
			t.Errorf("got %v after %v, want the Redis error soon after the context ended", err, time.Since(t0))
		}
	})

	t.Run("reports once even after a cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		calls := 0
		err := h.withRedis(ctx, log, "reporting", func(c context.Context) error {
			calls++
			return c.Err()
		})
		if err != nil || calls != 1 {
			t.Errorf("got %v after %d calls, want one successful call on a live context", err, calls)
		}
	})
}
