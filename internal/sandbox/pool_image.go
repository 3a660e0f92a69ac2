package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/renderbox/renderbox/internal/jobspec"
	"github.com/renderbox/renderbox/internal/wire"
)

// DefaultImages and DefaultImageMaxRestores are the pool's defaults for
// PoolFamily.Images and ImageMaxRestores (docs/security.md, "What restored
// sandboxes share", has the figures they were chosen from).
const (
	DefaultImages           = jobspec.DefaultImages
	DefaultImageMaxRestores = jobspec.DefaultImageMaxRestores
)

// image is a checkpoint of a booted sandbox.
type image struct {
	dir      string
	key      string
	made     time.Time
	maxAge   time.Duration // drawn in [ImageMaxAge/2, ImageMaxAge]
	restores int
}

// usable reports whether img may still be restored from: it is of the
// family's current key, and young and little used enough.
func (img *image) usable(key string, maxRestores int) bool {
	return img.key == key && time.Since(img.made) < img.maxAge && img.restores < maxRestores
}

// imageKey names what a checkpoint image depends on: the rootfs (and its
// EROFS image, if the sandboxes mount one), the runsc
// binary, the family's boot and its spec limits. A change to any of them
// makes the image stale.
func (p *Pool) imageKey(fc PoolFamily) string {
	cfg := p.m.Config()
	h := sha256.New()
	for _, path := range []string{p.m.Runsc().Path, filepath.Join(filepath.Dir(cfg.Rootfs), "manifest.json"), cfg.RootfsImage} {
		if path == "" {
			continue
		}
		if st, err := os.Stat(path); err == nil {
			fmt.Fprintf(h, "%s %d %d\n", path, st.Size(), st.ModTime().UnixNano())
		}
	}
	_ = json.NewEncoder(h).Encode(struct {
		Warm   wire.Warm
		Limits Limits
		Rootfs string
		Image  string
	}{fc.Warm, fc.Limits, cfg.Rootfs, cfg.RootfsImage})
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// pickImage returns a checkpoint image of the family to restore from. It
// retires the images that are stale, past their age or restore count, and
// picks one of the others at random. With none left it makes one (booting
// and checkpointing a template sandbox) and returns it; with fewer than
// Images it starts making one in the background, so that restores go on
// from the others meanwhile. Fills run one at a time per family: nothing
// restores from a retired image any more.
func (p *Pool) pickImage(ctx context.Context, f *family) (*image, error) {
	key := p.imageKey(f.cfg)
	f.mu.Lock()
	var live, retired []*image
	for _, img := range f.images {
		if img.usable(key, f.cfg.ImageMaxRestores) {
			live = append(live, img)
		} else {
			retired = append(retired, img)
		}
	}
	f.images = live
	another := len(live) > 0 && len(live) < f.cfg.Images && !f.making
	f.making = f.making || another
	f.mu.Unlock()
	for _, img := range retired {
		os.RemoveAll(img.dir)
	}
	if len(live) == 0 {
		return p.makeImage(ctx, f, key)
	}
	if another {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.m.Gate().Await(ctx, f.yielding)
			if _, err := p.makeImage(ctx, f, key); err != nil && ctx.Err() == nil {
				p.m.Logger().Warn("pool: making another checkpoint image failed", "family", f.cfg.Name, "err", err)
			}
			f.mu.Lock()
			f.making = false
			f.mu.Unlock()
		}()
	}
	return live[mrand.IntN(len(live))], nil
}

// makeImage boots a template sandbox, checkpoints it into a fresh image of
// the family and puts the image in use.
func (p *Pool) makeImage(ctx context.Context, f *family, key string) (*image, error) {
	t := time.Now()
	tpl, err := p.bootOne(ctx, f.cfg)
	if err != nil {
		return nil, fmt.Errorf("booting the template: %w", err)
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	dir := filepath.Join(p.m.Config().StateDir, "images", f.cfg.Name+"-"+key+"-"+newID())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, errors.Join(err, tpl.Destroy(dctx))
	}
	if f.cfg.TemplateWait > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(f.cfg.TemplateWait):
		}
	}
	err = tpl.Checkpoint(ctx, dir)
	if derr := tpl.Destroy(dctx); err == nil && derr != nil {
		p.m.Logger().Warn("pool: destroying the template", "family", f.cfg.Name, "err", derr)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("checkpointing the template: %w", err)
	}
	maxAge := f.cfg.ImageMaxAge/2 + mrand.N(f.cfg.ImageMaxAge/2+1)
	next := &image{dir: dir, key: key, made: time.Now(), maxAge: maxAge}
	f.mu.Lock()
	f.images = append(f.images, next)
	f.mu.Unlock()
	p.event(PoolEvent{Family: f.cfg.Name, Kind: PoolImage, Duration: time.Since(t)})
	p.m.Logger().Info("pool: checkpoint image made", "family", f.cfg.Name, "key", key,
		"duration_seconds", time.Since(t).Seconds(), "retires_after_seconds", maxAge.Seconds())
	return next, nil
}

// restoreOne creates a sandbox with fresh stdio and restores the family's
// checkpoint into it.
func (p *Pool) restoreOne(ctx context.Context, f *family) (sb *Sandbox, err error) {
	img, err := p.pickImage(ctx, f)
	if err != nil {
		return nil, err
	}
	args, err := warmArgs(f.cfg.Warm)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.BootTimeout)
	defer cancel()
	// No create: restore makes the container itself, one runsc run fewer.
	sb, err = p.m.NewSandbox(f.cfg.Limits, args)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	img.restores++
	f.mu.Unlock()
	if err := sb.Restore(ctx, img.dir); err != nil {
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer dcancel()
		// A broken image is not used again.
		f.mu.Lock()
		if i := slices.Index(f.images, img); i >= 0 {
			f.images = slices.Delete(f.images, i, i+1)
			os.RemoveAll(img.dir)
		}
		f.mu.Unlock()
		return nil, errors.Join(fmt.Errorf("restoring %s: %w", f.cfg.Name, err), sb.Destroy(dctx))
	}
	return sb, nil
}
