package ledger

import "time"

// Key is an API key as the ledger knows it: never its secret or its hash.
type Key struct {
	ID        string // key_<hex>
	Name      string
	CreatedAt time.Time
	RevokedAt time.Time // zero while the key is live
	// Admin keys may also call the operator's routes (GET /v1/workers).
	Admin bool
}

// Revoked reports whether the key has been revoked.
func (k Key) Revoked() bool { return !k.RevokedAt.IsZero() }
