package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Event is a job's progress, written by a worker and applied to the ledger
// by the API.
type Event struct {
	JobID        string    `json:"job_id"`
	State        string    `json:"state"` // running, succeeded, failed, canceled
	ErrorCode    string    `json:"error_code,omitempty"`
	ErrorMessage string    `json:"error_message,omitempty"`
	Outputs      []Output  `json:"outputs,omitempty"`
	At           time.Time `json:"at"`
	Worker       string    `json:"worker,omitempty"`
	// RootfsDigest is the digest of the rootfs tree the worker verified at
	// start and runs every sandbox on.
	RootfsDigest string `json:"rootfs_digest,omitempty"`
	// SandboxMode is how the job's sandbox was made: cold, prebooted or
	// restored.
	SandboxMode string `json:"sandbox_mode,omitempty"`
	// Diagnostics is what the job's page asked for and could not have,
	// and the errors it logged; nil when nothing.
	Diagnostics *Diagnostics `json:"diagnostics,omitempty"`
}

// Diagnostics is what a page did that its client should know: the first
// requests refused (another origin or scheme), the first same-origin
// requests for files the job does not have, the first console errors and
// uncaught exceptions. Each list is bounded by the agent.
type Diagnostics struct {
	RefusedRequests []string `json:"refused_requests,omitempty"`
	MissingFiles    []string `json:"missing_files,omitempty"`
	ConsoleErrors   []string `json:"console_errors,omitempty"`
}

// Output is an output file a worker stored.
type Output struct {
	Name      string `json:"name"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`
	MediaType string `json:"media_type"`
}

// Publish appends ev to the event stream.
func (q *Queue) Publish(ctx context.Context, ev Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return q.rdb.XAdd(ctx, &redis.XAddArgs{
		Stream: EventStream, MaxLen: 100_000, Approx: true,
		Values: map[string]any{"event": b},
	}).Err()
}

// Consume applies every event to apply, at least once, as consumer of
// group: events another consumer of the group read but did not
// acknowledge (it crashed) are picked up again. It returns when ctx ends.
func (q *Queue) Consume(ctx context.Context, group, consumer string, apply func(context.Context, Event) error) error {
	if err := q.createGroup(ctx, group); err != nil {
		return err
	}
	// First our own unacknowledged events (from before a restart), then new.
	start := "0"
	for ctx.Err() == nil {
		if start == ">" {
			// Claim what dead consumers left pending for over 30s.
			msgs, _, err := q.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
				Stream: EventStream, Group: group, Consumer: consumer, MinIdle: 30 * time.Second, Start: "0", Count: 100,
			}).Result()
			if err == nil {
				q.applyAll(ctx, group, msgs, apply)
			}
		}
		res, err := q.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group: group, Consumer: consumer, Streams: []string{EventStream, start}, Count: 100, Block: time.Second,
		}).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// Redis lost the group (it restarted without its data, or failed
			// over to a replica that never had it): every read would fail
			// with NOGROUP from now on, and no result would reach the ledger.
			if strings.HasPrefix(err.Error(), "NOGROUP") && q.createGroup(ctx, group) == nil {
				start = "0"
				continue
			}
			// Redis is down or restarting: retry without spinning.
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		n := 0
		for _, s := range res {
			n += len(s.Messages)
			q.applyAll(ctx, group, s.Messages, apply)
		}
		if start == "0" && n == 0 {
			start = ">"
		}
	}
	return nil
}

// createGroup creates the consumer group (and the stream) unless it exists.
// A new group starts at the stream's beginning, so events written before it
// existed are applied too.
func (q *Queue) createGroup(ctx context.Context, group string) error {
	err := q.rdb.XGroupCreateMkStream(ctx, EventStream, group, "0").Err()
	if err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("creating event consumer group: %w", err)
	}
	return nil
}

func (q *Queue) applyAll(ctx context.Context, group string, msgs []redis.XMessage, apply func(context.Context, Event) error) {
	for _, m := range msgs {
		raw, _ := m.Values["event"].(string)
		var ev Event
		if err := json.Unmarshal([]byte(raw), &ev); err != nil {
			// Malformed: acknowledge so it does not block the stream.
			q.rdb.XAck(ctx, EventStream, group, m.ID)
			continue
		}
		if err := apply(ctx, ev); err != nil {
			continue // stays pending; retried after a restart or claim
		}
		q.rdb.XAck(ctx, EventStream, group, m.ID)
	}
}
