// Package rootfs seals and verifies the renderer root filesystem. A built
// tree is a directory holding rootfs/ (what sandboxes mount read-only) and
// manifest.json (package versions, the agent's digest and a digest of the
// whole tree). The worker refuses to start on a tree that does not match its
// manifest: a tampered rootfs is a tampered renderer.
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

// Seal computes the digest of tree's rootfs/ and writes its manifest.
func Seal(tree, inputs string, packages map[string]string, packagesAt time.Time) (*Manifest, error) {
	d, err := Digest(Dir(tree))
	if err != nil {
		return nil, err
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
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("reading rootfs manifest: %w", err)
	}
	if m.Format != 1 || len(m.TreeSHA256) != 64 {
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
	line string // everything but the content digest
	path string // regular files only
	sum  string
}

// Digest hashes every entry under dir: path, type, permission bits
// (setuid included), owner, symlink target and file contents, in lexical
// order. Contents are hashed in parallel.
func Digest(dir string) (TreeDigest, error) {
	var ents []*entry
	var td TreeDigest
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		uid, gid := -1, -1
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
		e := &entry{rel: rel}
		mode := info.Mode()
		line := fmt.Sprintf("%q %s %d:%d", rel, mode.String(), uid, gid)
		switch {
		case mode.IsRegular():
			line += fmt.Sprintf(" %d", info.Size())
			e.path = p
			td.Files++
			td.Bytes += info.Size()
		case mode&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + fmt.Sprintf("%q", t)
		}
		e.line = line
		ents = append(ents, e)
		return nil
	})
	if err != nil {
		return td, fmt.Errorf("digesting rootfs %s: %w", dir, err)
	}
	if err := hashContents(ents); err != nil {
		return td, fmt.Errorf("digesting rootfs %s: %w", dir, err)
	}
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
	td.SHA256 = hex.EncodeToString(h.Sum(nil))
	return td, nil
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
				s, err := fileSHA256(e.path)
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
		if e.path != "" {
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
