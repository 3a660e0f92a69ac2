// Package migrations holds the ledger's SQL schema as numbered migration
// files (NNNN_name.sql) embedded into the binary: the SQLite dialect in
// this directory, the PostgreSQL one in postgres/, with the same numbers
// and names. The ledger applies them in order when it opens a database;
// see internal/ledger.
package migrations

import (
	"embed"
	"io/fs"
)

// FS holds every *.sql migration in this directory: SQLite's.
//
//go:embed *.sql
var FS embed.FS

//go:embed postgres/*.sql
var postgres embed.FS

// Postgres holds the PostgreSQL migrations, one for each of FS's.
var Postgres = mustSub(postgres, "postgres")

func mustSub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err) // dir is a literal that go:embed has checked
	}
	return sub
}
