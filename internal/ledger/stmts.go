package ledger

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// stmtCache holds the prepared statements of the queries every job's
// intake makes (the key lookup, the insert), one per query and pool.
// Preparing is parsing: modernc's SQLite spent about a sixth of the API's
// CPU under make bench's intake re-parsing the same few statements.
// database/sql prepares a cached statement once on each connection that
// runs it, and Tx.StmtContext reuses that connection's. Get one before a
// transaction on the same pool begins: preparing takes a connection.
type stmtCache struct {
	mu sync.Mutex
	m  map[stmtKey]*sql.Stmt
}

type stmtKey struct {
	db    *sql.DB
	query string
}

// get returns query prepared on db, preparing it on first use (not under
// the cache's lock: preparing may wait for a connection).
func (c *stmtCache) get(ctx context.Context, db *sql.DB, query string) (*sql.Stmt, error) {
	k := stmtKey{db, query}
	c.mu.Lock()
	st, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if had, ok := c.m[k]; ok {
		// Another caller prepared it meanwhile.
		_ = st.Close() // unused: nothing for this caller to act on
		return had, nil
	}
	if c.m == nil {
		c.m = map[stmtKey]*sql.Stmt{}
	}
	c.m[k] = st
	return st, nil
}

// close closes every cached statement.
func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for k, st := range c.m {
		errs = append(errs, st.Close())
		delete(c.m, k)
	}
	return errors.Join(errs...)
}
