package worker

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/renderbox/renderbox/internal/bytesize"
	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/sandbox"
)

// PoolConfig are the pool flags of `worker serve`.
type PoolConfig struct {
	// Sizes is idle sandboxes per family, "family=N,…", the least each
	// keeps (demand grows it up to four times, within Memory); "none" or
	// "off" disables the pool. Default chromium=4,office=1,pdf=8,light=4
	// (a 2-core host).
	Sizes string
	// Memory is each family's budget of idle memory, "family=BYTES,…" with
	// K/M/G suffixes (powers of 1024). Default chromium=1.5G,office=1G,
	// pdf=256M,light=256M.
	Memory string
	// Restore lists the families filled from a checkpoint image rather
	// than by booting each sandbox. Default chromium,office.
	Restore string
	// MaxIdle is how long a pool sandbox waits for a job before it is
	// replaced. Default 10m.
	MaxIdle time.Duration
	// Images is how many checkpoint images of a family restores pick from
	// at random; ImageMaxAge and ImageMaxRestores bound the use of each.
	// Defaults 2, 10m and 100.
	Images           int
	ImageMaxAge      time.Duration
	ImageMaxRestores int
	// FillWait is how long a job that finds its family empty waits for a
	// fill (a restore or a boot) to land before it runs cold; each fill
	// that lands starts the wait again. Default 2s.
	FillWait time.Duration
}

// Bind registers the pool flags on fs.
func (c *PoolConfig) Bind(fs *flag.FlagSet) {
	fs.StringVar(&c.Sizes, "pool-size", "chromium=4,office=1,pdf=8,light=4", `idle pre-booted sandboxes per family, the least it keeps: jobs finding a family empty grow it up to 4 times, within -pool-memory ("none" disables the pool)`)
	fs.StringVar(&c.Memory, "pool-memory", "chromium=1.5G,office=1G,pdf=256M,light=256M", "budget of idle memory per family")
	fs.StringVar(&c.Restore, "pool-restore", "chromium,office", `families filled by checkpoint/restore instead of booting ("" for none)`)
	fs.DurationVar(&c.MaxIdle, "pool-max-idle", 10*time.Minute, "replace a pool sandbox idle this long")
	fs.IntVar(&c.Images, "pool-images", sandbox.DefaultImages, "checkpoint images per restored family, each restore picking one at random")
	fs.DurationVar(&c.ImageMaxAge, "pool-image-max-age", 10*time.Minute, "retire a checkpoint image after a random age between half this and this")
	fs.IntVar(&c.ImageMaxRestores, "pool-image-max-restores", sandbox.DefaultImageMaxRestores, "retire a checkpoint image after this many restores")
	fs.DurationVar(&c.FillWait, "pool-fill-wait", 2*time.Second, "a job finding its family empty waits for the sandboxes it is restoring or booting, and runs cold once none has landed for this long (0: never waits)")
}

// families turns the flags into the pool's families; nil means no pool.
func (c PoolConfig) families() ([]sandbox.PoolFamily, error) {
	if s := strings.TrimSpace(c.Sizes); s == "none" || s == "off" || s == "" {
		return nil, nil
	}
	fams := render.PoolFamilies()
	known := map[string]*sandbox.PoolFamily{}
	var names []string
	for i := range fams {
		known[fams[i].Name] = &fams[i]
		names = append(names, fams[i].Name)
	}
	look := func(flagName, name string) (*sandbox.PoolFamily, error) {
		f := known[name]
		if f == nil {
			return nil, fmt.Errorf("-%s: unknown family %q (families: %s)", flagName, name, strings.Join(names, ", "))
		}
		return f, nil
	}
	err := eachPair("pool-size", c.Sizes, func(name, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 64 {
			return fmt.Errorf("-pool-size: %s=%s: want a count from 0 to 64", name, v)
		}
		f, err := look("pool-size", name)
		if err == nil {
			f.Size = n
		}
		return err
	})
	if err == nil {
		err = eachPair("pool-memory", c.Memory, func(name, v string) error {
			n, err := bytesize.Parse(v)
			if err != nil {
				return fmt.Errorf("-pool-memory: %s=%s: %w", name, v, err)
			}
			f, err := look("pool-memory", name)
			if err == nil {
				f.MemoryBudget = n
			}
			return err
		})
	}
	if err != nil {
		return nil, err
	}
	for _, name := range strings.Split(c.Restore, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		f, err := look("pool-restore", name)
		if err != nil {
			return nil, err
		}
		f.Restore = true
	}
	for i := range fams {
		// Every family waits for its fills: a restore is quicker and far
		// cheaper than a cold job, and a boot under way started before
		// the job would, so it lands sooner than the job's own boot and
		// costs no second one on the same cores.
		fams[i].FillWait = c.FillWait
		fams[i].MaxIdle = c.MaxIdle
		fams[i].Images = c.Images
		fams[i].ImageMaxAge = c.ImageMaxAge
		fams[i].ImageMaxRestores = c.ImageMaxRestores
	}
	return fams, nil
}

// eachPair calls fn for each name=value of a comma-separated list.
func eachPair(flagName, list string, fn func(name, value string) error) error {
	for _, kv := range strings.Split(list, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("-%s: %q is not family=value", flagName, kv)
		}
		if err := fn(strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
			return err
		}
	}
	return nil
}
