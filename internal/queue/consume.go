package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DeadLetterStream holds the result events that were delivered
// ConsumeConfig.MaxDeliveries times without being applied, each with its
// original id, its deliveries and the last error, for an operator to read
// (XRANGE) and, once the cause is fixed, to add back to EventStream.
const DeadLetterStream = prefix + "events:dead"

// Why an event went to the dead-letter stream without apply's error.
var (
	// ErrMalformed: the entry holds no event JSON.
	ErrMalformed = errors.New("malformed event")
	// ErrAbandoned: the event was delivered twice MaxDeliveries times
	// and no consumer ever finished applying it (each died while at it).
	ErrAbandoned = errors.New("delivered too often without an outcome")
)

// ConsumeConfig says how Consume retries what it could not apply.
type ConsumeConfig struct {
	// RetryAfter: an event read but not acknowledged — its apply failed,
	// or its consumer died — is claimed again, by any consumer of the
	// group, once it has been pending this long. The consumer that failed
	// it leaves it to the others for one more RetryAfter. Default 5s.
	RetryAfter time.Duration
	// MaxDeliveries: an event whose apply failed on its MaxDeliveries-th
	// delivery is moved to DeadLetterStream rather than retried forever.
	// Default 10.
	MaxDeliveries int64
	// Ready, when set, is asked after an apply fails: while it fails too,
	// the failure is an outage of what apply writes to (the ledger), not
	// the event's, and the consumer claims and reads nothing until Ready
	// passes, so an outage does not use up events' deliveries.
	Ready func(context.Context) error
	// DeadLettered, when set, is called for each event moved aside with
	// its last error (ErrMalformed, ErrAbandoned or apply's).
	DeadLettered func(ev Event, deliveries int64, err error)
	// Logger; nil discards.
	Logger *slog.Logger
}

func (c ConsumeConfig) withDefaults() ConsumeConfig {
	if c.RetryAfter <= 0 {
		c.RetryAfter = 5 * time.Second
	}
	if c.MaxDeliveries <= 0 {
		c.MaxDeliveries = 10
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// consumer is one Consume loop's state.
type consumer struct {
	q         *Queue
	group     string
	name      string
	cfg       ConsumeConfig
	apply     func(context.Context, Event) error
	lastPrune time.Time
}

// errOutage stops a batch: apply failed and so did Ready.
var errOutage = errors.New("the events' destination is unavailable")

// Consume applies every event to apply as consumer of group, until ctx
// ends. An event is acknowledged only once apply returned nil; one it
// failed stays pending and is retried after RetryAfter by whichever
// consumer of the group claims it first — another API replica, or this
// one — and so is every event a consumer read and never acknowledged
// because it died. apply must therefore be idempotent. After
// MaxDeliveries an event is moved to DeadLetterStream.
func (q *Queue) Consume(ctx context.Context, group, name string, cfg ConsumeConfig, apply func(context.Context, Event) error) error {
	c := &consumer{q: q, group: group, name: name, cfg: cfg.withDefaults(), apply: apply}
	if err := q.createGroup(ctx, group); err != nil {
		return err
	}
	// Claims are looked for at least twice per RetryAfter, and at most
	// once a second while events keep arriving.
	every := min(c.cfg.RetryAfter/2, time.Second)
	var lastClaim time.Time
	for ctx.Err() == nil {
		if time.Since(lastClaim) >= every {
			lastClaim = time.Now()
			if err := c.claim(ctx); err != nil {
				c.trouble(ctx, err)
				continue
			}
		}
		res, err := q.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group: group, Consumer: name, Streams: []string{EventStream, ">"}, Count: 100, Block: every,
		}).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			c.trouble(ctx, err)
			continue
		}
		for _, s := range res {
			if err := c.applyAll(ctx, s.Messages, func(string) int64 { return 1 }); err != nil {
				c.waitReady(ctx)
				break
			}
		}
	}
	return nil
}

// trouble handles a failed Redis call: it makes the group again when Redis
// lost it, else waits a second.
func (c *consumer) trouble(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	// Redis lost the group (it restarted without its data, or failed over
	// to a replica that never had it): every read would fail with NOGROUP
	// from now on, and no result would reach the ledger.
	if strings.HasPrefix(err.Error(), "NOGROUP") && c.q.createGroup(ctx, c.group) == nil {
		return
	}
	// Redis is down or restarting: retry without spinning.
	sleep(ctx, time.Second)
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// claim takes over the events pending for RetryAfter or longer and
// applies them. XCLAIM with the same minimum idle time lets only one of
// several consumers racing for an event have it.
func (c *consumer) claim(ctx context.Context) error {
	c.prune(ctx)
	pending, err := c.q.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream: EventStream, Group: c.group, Idle: c.cfg.RetryAfter, Start: "-", End: "+", Count: 100,
	}).Result()
	if err != nil {
		return err
	}
	deliveries := map[string]int64{}
	var ids []string
	for _, p := range pending {
		// What this consumer failed is the others' first: with ledgers
		// that differ (a misconfiguration, see the API's apply) another
		// replica may know the job.
		if p.Consumer == c.name && p.Idle < 2*c.cfg.RetryAfter {
			continue
		}
		ids = append(ids, p.ID)
		deliveries[p.ID] = p.RetryCount + 1 // XCLAIM counts one more
	}
	if len(ids) == 0 {
		return nil
	}
	msgs, err := c.q.rdb.XClaim(ctx, &redis.XClaimArgs{
		Stream: EventStream, Group: c.group, Consumer: c.name, MinIdle: c.cfg.RetryAfter, Messages: ids,
	}).Result()
	if err != nil {
		return err
	}
	var fresh []redis.XMessage
	for _, m := range msgs {
		// Past MaxDeliveries an event is still tried (its last delivery
		// may have met an outage, which does not count), but not forever:
		// one whose consumers keep dying while applying it is given up.
		if deliveries[m.ID] > 2*c.cfg.MaxDeliveries {
			c.deadLetter(ctx, m, deliveries[m.ID], ErrAbandoned)
			continue
		}
		fresh = append(fresh, m)
	}
	if c.applyAll(ctx, fresh, func(id string) int64 { return deliveries[id] }) != nil {
		c.waitReady(ctx)
	}
	return nil
}

// applyAll applies msgs in order and acknowledges each one applied. It
// stops at an outage (errOutage), leaving the rest pending.
func (c *consumer) applyAll(ctx context.Context, msgs []redis.XMessage, deliveries func(id string) int64) error {
	for _, m := range msgs {
		n := deliveries(m.ID)
		raw, _ := m.Values["event"].(string)
		var ev Event
		if err := json.Unmarshal([]byte(raw), &ev); err != nil {
			c.deadLetter(ctx, m, n, fmt.Errorf("%w: %v", ErrMalformed, err))
			continue
		}
		err := c.apply(ctx, ev)
		if err == nil {
			// Should the ack be lost, the event is applied again, to no
			// effect: apply is idempotent.
			c.q.rdb.XAck(ctx, EventStream, c.group, m.ID)
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if c.cfg.Ready != nil {
			if rerr := c.cfg.Ready(ctx); rerr != nil {
				c.cfg.Logger.Warn("result events wait: their destination does not answer; the event stays pending",
					"job_id", ev.JobID, "event_id", m.ID, "err", err, "ready_err", rerr)
				return errOutage
			}
		}
		if n >= c.cfg.MaxDeliveries {
			c.deadLetter(ctx, m, n, err)
			continue
		}
		c.cfg.Logger.Warn("result event not applied; it stays pending and is retried",
			"job_id", ev.JobID, "state", ev.State, "event_id", m.ID, "deliveries", n,
			"max_deliveries", c.cfg.MaxDeliveries, "retry_after_seconds", c.cfg.RetryAfter.Seconds(), "err", err)
	}
	return nil
}

// waitReady waits, backing off up to 30s, until Ready passes or ctx ends.
func (c *consumer) waitReady(ctx context.Context) {
	for d := time.Second; ctx.Err() == nil; d = min(2*d, 30*time.Second) {
		sleep(ctx, d)
		if c.cfg.Ready == nil || c.cfg.Ready(ctx) == nil {
			return
		}
	}
}

// deadLetter moves m to DeadLetterStream and acknowledges it, both or
// neither (MULTI).
func (c *consumer) deadLetter(ctx context.Context, m redis.XMessage, deliveries int64, cause error) {
	raw, _ := m.Values["event"].(string)
	var ev Event
	_ = json.Unmarshal([]byte(raw), &ev)
	pipe := c.q.rdb.TxPipeline()
	pipe.XAdd(ctx, &redis.XAddArgs{
		Stream: DeadLetterStream, MaxLen: 10_000, Approx: true,
		Values: map[string]any{"event": raw, "id": m.ID, "deliveries": deliveries, "error": cause.Error(), "consumer": c.name},
	})
	pipe.XAck(ctx, EventStream, c.group, m.ID)
	if _, err := pipe.Exec(ctx); err != nil {
		c.cfg.Logger.Error("moving a result event to the dead-letter stream failed; it stays pending",
			"job_id", ev.JobID, "event_id", m.ID, "err", err)
		return
	}
	c.cfg.Logger.Error("result event given up after its deliveries and moved to the dead-letter stream: its result is NOT in the ledger; fix the cause, then XADD it back to "+EventStream,
		"job_id", ev.JobID, "state", ev.State, "event_id", m.ID, "deliveries", deliveries, "dead_letter_stream", DeadLetterStream, "err", cause)
	if c.cfg.DeadLettered != nil {
		c.cfg.DeadLettered(ev, deliveries, cause)
	}
}

// prune deletes, at most once a minute, the group's consumers that hold no
// pending event and have not read for an hour: every API process is a
// consumer of its own (host and pid), so each restart leaves one behind.
func (c *consumer) prune(ctx context.Context) {
	if time.Since(c.lastPrune) < time.Minute {
		return
	}
	c.lastPrune = time.Now()
	cs, err := c.q.rdb.XInfoConsumers(ctx, EventStream, c.group).Result()
	if err != nil {
		return
	}
	for _, x := range cs {
		if x.Name != c.name && x.Pending == 0 && x.Idle > time.Hour {
			c.q.rdb.XGroupDelConsumer(ctx, EventStream, c.group, x.Name)
		}
	}
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

// EventsPending is how many result events group's consumers read and have
// not acknowledged (being applied, or left to retry).
func (q *Queue) EventsPending(ctx context.Context, group string) (int, error) {
	p, err := q.rdb.XPending(ctx, EventStream, group).Result()
	if err != nil {
		if strings.HasPrefix(err.Error(), "NOGROUP") {
			return 0, nil
		}
		return 0, err
	}
	return int(p.Count), nil
}

// DeadLetters is how many events DeadLetterStream holds.
func (q *Queue) DeadLetters(ctx context.Context) (int, error) {
	n, err := q.rdb.XLen(ctx, DeadLetterStream).Result()
	return int(n), err
}
