package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Reap removes what a crashed predecessor left behind in this manager's
// state dir and cgroup parent: containers (`runsc list` → kill →
// `delete --force`), bundle directories, cgroups and the lock files and
// control sockets runsc left for containers it no longer knows (Strays).
// It returns how many containers it deleted. Call it before taking jobs.
// It needs the state dir's lock (Lock): taken for the call unless this
// manager holds it, and refused with *BusyError while a running worker
// holds it, whose sandboxes are not leftovers.
func (m *Manager) Reap(ctx context.Context) (int, error) {
	if !m.holdsLock() {
		unlock, err := m.Lock()
		if err != nil {
			return 0, err
		}
		defer unlock()
	}
	var errs []error
	cs, err := m.runsc.List(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("listing leftover sandboxes: %w", err))
	}
	for _, c := range cs {
		_ = m.runsc.Kill(ctx, c.ID, KillOpts{Signal: 9, All: true})
		if err := m.runsc.Delete(ctx, c.ID, DeleteOpts{Force: true}); err != nil {
			errs = append(errs, fmt.Errorf("deleting leftover sandbox %s: %w", c.ID, err))
		}
	}
	// Bundles, and the pool's checkpoint images: a predecessor's images
	// hold its renderers' memory and are never reused.
	for _, sub := range []string{"bundles", "images"} {
		dir := filepath.Join(m.cfg.StateDir, sub)
		if ents, err := os.ReadDir(dir); err == nil {
			for _, e := range ents {
				if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	for _, d := range LeftoverCgroups("/" + m.cfg.CgroupParent) {
		if err := removeCgroupDir(d); err != nil {
			errs = append(errs, err)
		}
	}
	for _, f := range m.runsc.Strays() {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(cs) > 0 {
		m.log.Warn("reaped sandboxes left by a predecessor", "count", len(cs))
	}
	return len(cs), errors.Join(errs...)
}

// Leftovers lists what this manager's sandboxes left behind: containers
// runsc still knows, bundle directories, cgroups and runsc's stray lock
// files and sockets. Empty means clean.
func (m *Manager) Leftovers(ctx context.Context) ([]string, error) {
	var left []string
	cs, err := m.runsc.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		left = append(left, "container "+c.ID+" ("+c.Status+")")
	}
	for _, sub := range []string{"bundles", "images"} {
		if ents, err := os.ReadDir(filepath.Join(m.cfg.StateDir, sub)); err == nil {
			for _, e := range ents {
				left = append(left, strings.TrimSuffix(sub, "s")+" "+e.Name())
			}
		}
	}
	for _, d := range LeftoverCgroups("/" + m.cfg.CgroupParent) {
		left = append(left, "cgroup "+d)
	}
	for _, f := range m.runsc.Strays() {
		left = append(left, "runsc file "+filepath.Base(f))
	}
	return left, nil
}
