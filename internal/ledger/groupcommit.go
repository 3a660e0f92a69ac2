package ledger

import (
	"context"
	"database/sql"
	"sync"
)

// Group commit. A SQLite database has one writer, and each commit waits
// for the disk (the WAL is synced: an accepted job survives a power cut),
// so one transaction per job caps intake at one job per sync, however
// many clients submit. Instead the jobs that arrive while a transaction
// commits are inserted together in the next one: one sync for all of
// them. No job waits for a timer; a job alone is committed at once.
//
// One caller at a time leads: it takes every job waiting (its own among
// them), inserts and commits them, answers each, and hands the lead to
// the first job that arrived meanwhile, which then does the same. A job
// whose insert fails (its id taken, say) fails alone; the statement is
// undone and the others commit. A failed commit fails the whole group.
//
// PostgreSQL needs none of this (its connections commit concurrently and
// it groups syncs itself), and an error there would abort the whole
// transaction; its store leaves group nil.
type groupCommit struct {
	mu    sync.Mutex
	queue []*insertCall
	busy  bool
}

// insertCall is one CreateJob waiting in a group.
type insertCall struct {
	ctx     context.Context
	job     Job
	created bool
	err     error
	lead    bool          // this call commits the next group
	wake    chan struct{} // closed when the call is answered or leads
}

// insert runs ins for job in a group's transaction on db and returns what
// it returned for this job.
func (g *groupCommit) insert(ctx context.Context, db *sql.DB, job Job, ins func(context.Context, *sql.Tx, Job) (Job, bool, error)) (Job, bool, error) {
	c := &insertCall{ctx: ctx, job: job, wake: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	lead := !g.busy
	if lead {
		g.busy, c.lead = true, true
	}
	g.mu.Unlock()
	if !lead {
		<-c.wake
		// Answered, or handed the lead (written under the lock).
		g.mu.Lock()
		lead = c.lead
		g.mu.Unlock()
	}
	if lead {
		g.mu.Lock()
		group := g.queue
		g.queue = nil
		g.mu.Unlock()
		// The group's transaction is not the leader's alone: it must not
		// end when the leader's request does.
		g.commit(context.WithoutCancel(ctx), db, group, ins)
		g.mu.Lock()
		if len(g.queue) > 0 {
			next := g.queue[0]
			next.lead = true
			close(next.wake)
		} else {
			g.busy = false
		}
		g.mu.Unlock()
	}
	return c.job, c.created, c.err
}

// commit inserts and commits group, answers each call, and wakes every
// call but the one leading (which is not waiting).
func (g *groupCommit) commit(ctx context.Context, db *sql.DB, group []*insertCall, ins func(context.Context, *sql.Tx, Job) (Job, bool, error)) {
	err := inTx(ctx, db, func(tx *sql.Tx) error {
		for _, c := range group {
			if c.err = c.ctx.Err(); c.err != nil {
				continue // its request ended while it waited: not recorded
			}
			c.job, c.created, c.err = ins(ctx, tx, c.job)
		}
		return nil
	})
	for _, c := range group {
		if err != nil {
			c.job, c.created, c.err = Job{}, false, err
		}
		if !c.lead {
			close(c.wake)
		}
	}
}
