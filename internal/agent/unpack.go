package agent

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"github.com/renderbox/renderbox/internal/wire"
	"github.com/renderbox/renderbox/internal/zipdir"
)

// UnpackArg runs the agent as the unpacker: a renderer process (it parses
// the client's archive) that unpacks it, the wire.Unpack as JSON in the
// next argument. The host checked the archive's directory already; this
// reads it the host's way and checks again, and counts what it writes
// rather than what the directory claims.
const UnpackArg = "--unpack"

// unpackStep is the step that runs the unpacker.
func unpackStep(u *wire.Unpack) (wire.Step, error) {
	arg, err := json.Marshal(u)
	if err != nil {
		return wire.Step{}, err
	}
	return wire.Step{Argv: []string{"/proc/self/exe", UnpackArg, string(arg)}}, nil
}

// Unpack is the unpacker's side, arg its wire.Unpack as JSON. It returns
// the process's exit status, the reason for a failure written to stderr,
// which becomes the job's: 1 for the archive, 2 for the request.
func Unpack(arg string, stderr io.Writer) int {
	var u wire.Unpack
	if err := json.Unmarshal([]byte(arg), &u); err != nil {
		fmt.Fprintf(stderr, "renderbox-agent: unpack request: %v\n", err)
		return 2
	}
	if err := unpack(&u); err != nil {
		fmt.Fprintf(stderr, "renderbox-unpack: %v\n", err)
		return 1
	}
	return 0
}

func unpack(u *wire.Unpack) error {
	zr, err := openArchive(u.Archive)
	if err != nil {
		return err
	}
	if err := os.Mkdir(u.Dir, 0o755); err != nil {
		return err
	}
	files, left := 0, u.MaxBytes
	for _, f := range zr.File {
		name := f.Name
		dir := f.FileInfo().IsDir() || (len(name) > 0 && name[len(name)-1] == '/')
		if dir {
			name = name[:max(0, len(name)-1)]
		}
		switch {
		case !wire.ValidSitePath(name):
			return fmt.Errorf("entry %q: not an acceptable path (relative, no \"..\", no \\ \" < > & ' %% ? # or control characters)", name)
		case f.Flags&1 != 0:
			return fmt.Errorf("entry %q is encrypted", name)
		case f.Mode()&fs.ModeType&^fs.ModeDir != 0:
			return fmt.Errorf("entry %q is not a file or a directory (%v)", name, f.Mode().Type())
		}
		target := filepath.Join(u.Dir, name)
		if dir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			continue
		}
		if files++; files > u.MaxFiles {
			return fmt.Errorf("the archive holds more than %d files", u.MaxFiles)
		}
		if err := os.MkdirAll(path.Dir(target), 0o755); err != nil {
			return err
		}
		n, err := unpackFile(f, target, left)
		if err != nil {
			return fmt.Errorf("entry %q: %w", name, err)
		}
		left -= n
	}
	return nil
}

// openArchive opens the archive as the host read it. The host judged it by
// zipdir's reading, which refuses a directory that disagrees with its end
// record; archive/zip reads on past a directory's stated size, and must
// find the same entries in the same order, or nothing is unpacked.
func openArchive(name string) (*zip.Reader, error) {
	b, err := mapFile(name)
	if err != nil {
		return nil, fmt.Errorf("reading the archive: %w", err)
	}
	var names [][]byte // slices of b
	if err := zipdir.Walk(b, func(e *zipdir.Entry) error { names = append(names, e.Name); return nil }); err != nil {
		return nil, fmt.Errorf("reading the archive's directory: %w", err)
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("reading the archive: %w", err)
	}
	if len(zr.File) != len(names) {
		return nil, fmt.Errorf("reading the archive: archive/zip finds %d entries where its directory holds %d", len(zr.File), len(names))
	}
	for i, f := range zr.File {
		if f.Name != string(names[i]) {
			return nil, fmt.Errorf("reading the archive: archive/zip finds entry %d named %q where its directory has %q", i, f.Name, names[i])
		}
	}
	return zr, nil
}

// mapFile maps name read-only: the archive stays in the page cache of its
// tmpfs rather than being copied into the unpacker's memory.
func mapFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return nil, err
	}
	return syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
}

// unpackFile writes f to target, at most limit bytes; a name seen before
// fails (O_EXCL), as does anything but a new regular file (O_NOFOLLOW).
func unpackFile(f *zip.File, target string, limit int64) (int64, error) {
	if f.UncompressedSize64 > uint64(limit) {
		return 0, fmt.Errorf("its %d bytes are over what the archive may unpack to", f.UncompressedSize64)
	}
	rc, err := f.Open()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	out, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, io.LimitReader(rc, limit+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > limit {
		err = fmt.Errorf("it unpacks to more than the archive may (%d bytes in all)", limit)
	}
	return n, err
}
