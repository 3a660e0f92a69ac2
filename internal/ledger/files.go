package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The ledger holds every job's owner, options and error text, and the key
// hashes: readable by its owner only. SQLite makes its -wal and -shm files
// with the database file's permissions, so getting the main file right
// gets all three right.
const (
	fileMode = 0o600
	dirMode  = 0o700
)

// prepareFiles makes the ledger's directory (0700) when it is missing,
// creates the database file 0600 before SQLite does (SQLite would use
// 0644), and narrows an existing database, WAL or shared-memory file that
// is readable by others to 0600. An existing directory is left as it is:
// it may be shared (a temporary directory), and it is the operator's.
func prepareFiles(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), dirMode); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return err
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if st.Mode().Perm()&^fileMode != 0 {
			if err := os.Chmod(p, fileMode); err != nil {
				return fmt.Errorf("narrowing %s to 0600: %w", p, err)
			}
		}
	}
	return nil
}
