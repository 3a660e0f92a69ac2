package apiserver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/renderbox/renderbox/internal/flagargs"
	"github.com/renderbox/renderbox/internal/ledger"
)

// keysFlags is api keys sub's command line: the ledger's flags and
// create's -admin and -create, which say what to do rather than set
// anything (no variable).
func keysFlags(sub string, c *Config) (fs *flag.FlagSet, admin, create *bool) {
	fs = flag.NewFlagSet("api keys "+sub, flag.ContinueOnError)
	c.bindLedger(fs)
	admin, create = new(bool), new(bool)
	if sub == "create" {
		fs.BoolVar(admin, "admin", false, "an admin key: may also list the workers (GET /v1/workers)")
		fs.BoolVar(create, "create", false, "make the SQLite ledger -db names if it does not exist (a new, empty ledger)")
	}
	return fs, admin, create
}

// notSettings are the flags of api's commands that have no variable.
var notSettings = []string{"version", "admin", "create"}

func keys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("api keys needs a command: create, revoke or list")
	}
	sub := args[0]
	switch sub {
	case "create", "revoke", "list":
	default:
		// Refused before the ledger is opened: a mistyped command must
		// not make or migrate a ledger.
		return usagef("unknown keys command %q (create, revoke, list)", sub)
	}
	var c Config
	fs, adminFlag, createFlag := keysFlags(sub, &c)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // -h: the synopsis and flags below, on stdout
	pos, err := flagargs.Parse(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stdout, "usage: api keys %s\n\nflags (before or after the argument):\n", keysSynopsis[sub])
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return err
	}
	if err != nil {
		return parseError(err)
	}
	if want := map[string]int{"create": 1, "revoke": 1, "list": 0}[sub]; len(pos) != want {
		return usagef("api keys %s takes %s, got %d arguments", sub, map[string]string{"create": "one NAME", "revoke": "one ID", "list": "none"}[sub], len(pos))
	}
	if err := c.settle(fs); err != nil {
		return err
	}
	admin, create := *adminFlag, *createFlag
	if err := ledgerExists(c.DB, create); err != nil {
		return err
	}
	store, err := ledger.OpenStore(ctx, c.DB)
	if err != nil {
		return fmt.Errorf("opening the ledger: %w", err)
	}
	defer store.Close()
	switch sub {
	case "create":
		create, kind := store.CreateKey, "key"
		if admin {
			create, kind = store.CreateAdminKey, "admin key"
		}
		secret, k, err := create(ctx, pos[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "created %s %s (%s); the secret below is shown once:\n", kind, k.ID, k.Name)
		fmt.Fprintln(stdout, secret)
	case "revoke":
		if err := store.RevokeKey(ctx, pos[0]); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "revoked %s\n", pos[0])
	case "list":
		ks, err := store.ListKeys(ctx)
		if err != nil {
			return err
		}
		for _, k := range ks {
			state := "active"
			if k.Revoked() {
				state = "revoked " + k.RevokedAt.UTC().Format(time.RFC3339)
			}
			if k.Admin {
				state += "\tadmin"
			}
			fmt.Fprintf(stdout, "%s\t%s\t%s\t%s\n", k.ID, k.Name, k.CreatedAt.UTC().Format(time.RFC3339), state)
		}
	}
	return nil
}

var keysSynopsis = map[string]string{
	"create": "create [-admin] [-create] [-db FILE|URL | -db-file F] NAME",
	"revoke": "revoke [-db FILE|URL | -db-file F] ID",
	"list":   "list [-db FILE|URL | -db-file F]",
}

// ledgerExists refuses a SQLite ledger path that names no file unless
// create says to make one: opening makes a missing file, and a misspelled
// -db once gave a key in a new, empty ledger that no API served. A
// PostgreSQL URL names a database that is there or not; nothing to check.
func ledgerExists(db string, create bool) error {
	if ledger.IsPostgresURL(db) || create {
		return nil
	}
	if _, err := os.Stat(db); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the ledger %s does not exist (check -db, or RENDERBOX_DB; api serve makes it at its first start, or add -create to make an empty one here)", db)
	} else if err != nil {
		return fmt.Errorf("the ledger %s: %w", db, err)
	}
	return nil
}
