// Package migrations holds the ledger's SQL schema as numbered migration
// files (NNNN_name.sql, SQLite dialect) embedded into the binary. The ledger
// applies them in order when it opens a database; see internal/ledger.
package migrations

import "embed"

// FS holds every *.sql migration in this directory.
//
//go:embed *.sql
var FS embed.FS
