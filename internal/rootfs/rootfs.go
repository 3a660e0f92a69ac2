// Package rootfs seals and verifies the renderer root filesystem. A built
// tree is a directory holding rootfs/ (what sandboxes mount read-only) and
// manifest.json (package versions, the agent's digest and a digest of the
// whole tree). The worker refuses to start on a tree that does not match its
// manifest: a tampered rootfs is a tampered renderer. Export and Import
// carry a sealed tree to hosts that do not build one, as one archive
// named by the tree's digest (export.go, import.go).
package rootfs

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ManifestName is the manifest's file name next to rootfs/.
const ManifestName = "manifest.json"

// AgentPath is where the agent lives inside the tree.
const AgentPath = "usr/local/bin/renderbox-agent"

// Manifest describes a sealed tree.
type Manifest struct {
	Format int `json:"format"`
	// Inputs is the digest of the build inputs (package list, sources,
	// build script) the base was built from.
	Inputs  string    `json:"inputs"`
	Created time.Time `json:"created"`
	// PackagesAt is when the packages were fetched from Debian (the base's
	// build); a tree assembled today from an old base is as old as it.
	// Zero in manifests from before it was recorded: Created stands in.
	PackagesAt  time.Time         `json:"packages_at,omitzero"`
	Packages    map[string]string `json:"packages"`
	AgentSHA256 string            `json:"agent_sha256"`
	TreeSHA256  string            `json:"tree_sha256"`
	Files       int               `json:"files"`
	Bytes       int64             `json:"bytes"`
}

// ErrTampered means the tree no longer matches its manifest.
var ErrTampered = errors.New("rootfs does not match its manifest")

// Dir returns the rootfs/ directory of a built tree.
func Dir(tree string) string { return filepath.Join(tree, "rootfs") }

// Seal computes the digest of tree's rootfs/ and writes its manifest. It
// refuses a tree that is not in normal form (normalForm): what is sealed
// is what Export packs and Import installs.
func Seal(tree, inputs string, packages map[string]string, packagesAt time.Time) (*Manifest, error) {
	d, err := digest(Dir(tree), normalForm)
	if err != nil {
		return nil, fmt.Errorf("sealing rootfs: %w", err)
	}
	agent, err := fileSHA256(filepath.Join(Dir(tree), AgentPath))
	if err != nil {
		return nil, fmt.Errorf("sealing rootfs: the agent is missing: %w", err)
	}
	m := &Manifest{
		Format: 1, Inputs: inputs, Created: time.Now().UTC(), PackagesAt: packagesAt.UTC(), Packages: packages,
		AgentSHA256: agent, TreeSHA256: d.SHA256, Files: d.Files, Bytes: d.Bytes,
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return m, os.WriteFile(filepath.Join(tree, ManifestName), append(b, '\n'), 0o644)
}

// Age is how old the tree's packages are at now.
func (m *Manifest) Age(now time.Time) time.Duration {
	at := m.PackagesAt
	if at.IsZero() {
		at = m.Created
	}
	return now.Sub(at)
}

// ReadManifest reads tree's manifest.
func ReadManifest(tree string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(tree, ManifestName))
	if err != nil {
		return nil, fmt.Errorf("reading rootfs manifest: %w (build the rootfs with: make rootfs)", err)
	}
	return parseManifest(b)
}

func parseManifest(b []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("reading rootfs manifest: %w", err)
	}
	if m.Format != 1 || !isSHA256(m.TreeSHA256) {
		return nil, fmt.Errorf("reading rootfs manifest: unknown format %d or bad digest (rebuild with: make rootfs)", m.Format)
	}
	return &m, nil
}

// Verify recomputes tree's digest and compares it with its manifest.
func Verify(tree string) (*Manifest, error) {
	m, err := ReadManifest(tree)
	if err != nil {
		return nil, err
	}
	d, err := Digest(Dir(tree))
	if err != nil {
		return nil, err
	}
	if d.SHA256 != m.TreeSHA256 {
		return m, fmt.Errorf("%w: %s has digest %s, its manifest says %s (rebuild with: make rootfs)",
			ErrTampered, Dir(tree), d.SHA256, m.TreeSHA256)
	}
	return m, nil
}

// TreeDigest is the digest of a directory tree.
type TreeDigest struct {
	SHA256 string
	Files  int
	Bytes  int64
}

type entry struct {
	rel  string
	line string                 // everything but the content digest
	hash func() (string, error) // regular files only: their content's digest
	sum  string
}

// Digest hashes every entry under dir: path, type, permission bits
// (setuid included), owner, symlink target and file contents, in lexical
// order. Contents are hashed in parallel.
func Digest(dir string) (TreeDigest, error) { return digest(dir, nil) }

// digest is Digest; check, when set, may refuse an entry.
func digest(dir string, check func(mode fs.FileMode, own [2]int) error) (TreeDigest, error) {
	var ents []*entry
	var td TreeDigest
	err := walk(dir, func(p, rel string, info fs.FileInfo) (err error) {
		if check != nil {
			if err := check(info.Mode(), owner(info)); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
		}
		e := &entry{rel: rel}
		target := ""
		switch mode := info.Mode(); {
		case mode.IsRegular():
			e.hash = func() (string, error) { return fileSHA256(p) }
			td.Files++
			td.Bytes += info.Size()
		case mode&fs.ModeSymlink != 0:
			if target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		e.line = describe(rel, info.Mode(), owner(info), info.Size(), target)
		ents = append(ents, e)
		return nil
	})
	if err != nil {
		return td, fmt.Errorf("digesting rootfs %s: %w", dir, err)
	}
	if err := hashContents(ents); err != nil {
		return td, fmt.Errorf("digesting rootfs %s: %w", dir, err)
	}
	td.SHA256 = sumLines(ents)
	return td, nil
}

// walk calls fn for every entry under dir, in lexical order, with its
// path, its path relative to dir and its lstat.
func walk(dir string, fn func(p, rel string, info fs.FileInfo) error) error {
	return filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		return fn(p, rel, info)
	})
}

// describe is an entry's line in a tree digest, all but its content's
// digest: its path, type and permission bits (setuid included), owner, and
// its size (regular files) or target (symlinks). Digest and Export write
// the same lines, so an export digests the tree it packs.
func describe(rel string, mode fs.FileMode, own [2]int, size int64, target string) string {
	line := fmt.Sprintf("%q %s %d:%d", rel, mode.String(), own[0], own[1])
	switch {
	case mode.IsRegular():
		line += fmt.Sprintf(" %d", size)
	case mode&fs.ModeSymlink != 0:
		line += " -> " + fmt.Sprintf("%q", target)
	}
	return line
}

// ErrNotNormal means a tree, an archive or an image holds an entry that
// is not in normal form (normalForm).
var ErrNotNormal = errors.New("not in a rootfs's normal form")

// normalForm refuses an entry that is not root's (uid and gid 0) or that
// has a setuid, setgid or sticky bit: every tree is sealed, exported,
// imported and made into an image in this form (rootfs/build.sh makes its
// trees so; docs/security.md, "The rootfs on the host"). Nothing in a
// rootfs may raise a process's privileges or belong to a user of the host
// the tree happens to be on; its scratch directories need no sticky bit,
// as the sandbox covers /tmp with a tmpfs and mounts the rest read-only.
func normalForm(mode fs.FileMode, own [2]int) error {
	var what string
	switch {
	case own != [2]int{0, 0}:
		what = fmt.Sprintf("is owned by %d:%d, not root's (0:0)", own[0], own[1])
	case mode&fs.ModeSetuid != 0:
		what = "is setuid"
	case mode&fs.ModeSetgid != 0:
		what = "is setgid"
	case mode&fs.ModeSticky != 0:
		what = "is sticky"
	default:
		return nil
	}
	return fmt.Errorf("%s %s: %w (rootfs/build.sh makes every entry root's, without setuid, setgid or sticky bits: rebuild with make rootfs)", mode, what, ErrNotNormal)
}

// owner is info's uid and gid, or -1 where the system has none.
func owner(info fs.FileInfo) [2]int {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return [2]int{int(st.Uid), int(st.Gid)}
	}
	return [2]int{-1, -1}
}

// sumLines is the tree digest of lines: each entry's line and, for regular
// files, its content's digest.
func sumLines(ents []*entry) string {
	h := sha256.New()
	w := bufio.NewWriter(h)
	for _, e := range ents {
		w.WriteString(e.line)
		if e.sum != "" {
			w.WriteString(" " + e.sum)
		}
		w.WriteString("\n")
	}
	w.Flush()
	return hex.EncodeToString(h.Sum(nil))
}

func hashContents(ents []*entry) error {
	work := make(chan *entry)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := 0; i < max(2, runtime.NumCPU()); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range work {
				s, err := e.hash()
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				e.sum = s
			}
		}()
	}
	for _, e := range ents {
		if e.hash != nil {
			work <- e
		}
	}
	close(work)
	wg.Wait()
	return errors.Join(errs...)
}

func fileSHA256(p string) (string, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// isSHA256 reports whether s is a SHA-256 digest in lowercase hex (what
// names an imported tree: nothing else may reach a path).
func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ParsePackages reads dpkg-query's "name\tversion" lines.
func ParsePackages(r io.Reader) (map[string]string, error) {
	pk := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, ver, ok := strings.Cut(sc.Text(), "\t")
		if ok && name != "" {
			pk[name] = ver
		}
	}
	return pk, sc.Err()
}
