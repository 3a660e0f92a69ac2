//go:build !unit

package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/internal/wire"
)

// lightPool starts a pool of sandboxes whose agent only waits (what the
// light renderers use) and waits until size are ready.
func lightPool(t *testing.T, m *sandbox.Manager, size int, lim sandbox.Limits) *sandbox.Pool {
	t.Helper()
	p := testenv.Pool(t, m, sandbox.PoolFamily{
		Name: "light", Warm: wire.Warm{Kind: wire.WarmNone}, Limits: lim, Size: size,
	})
	waitReady(t, p, size)
	return p
}

func waitReady(t *testing.T, p *sandbox.Pool, n int) { t.Helper(); waitIdle(t, p, n, time.Minute) }

// waitIdle fails the test unless the light family holds n idle sandboxes
// within d; it returns how long that took.
func waitIdle(t *testing.T, p *sandbox.Pool, n int, d time.Duration) time.Duration {
	t.Helper()
	t0 := time.Now()
	for p.Idle("light") < n {
		if time.Since(t0) > d {
			t.Fatalf("%d sandboxes ready after %s, want %d", p.Idle("light"), d, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(t0)
}

func take(t *testing.T, p *sandbox.Pool, lim sandbox.Limits) *sandbox.Sandbox {
	t.Helper()
	sb, mode := p.Take(context.Background(), "light", lim)
	if sb == nil || mode != sandbox.ModePrebooted {
		t.Fatalf("Take = %v, %q; want a prebooted sandbox", sb, mode)
	}
	return sb
}

// cgroupValue reads a file of the sandbox's cgroup (cgroup v1 or v2).
func cgroupValue(t *testing.T, m *sandbox.Manager, sb *sandbox.Sandbox, v1, v2 string) string {
	t.Helper()
	rel := filepath.Join(m.Config().CgroupParent, sb.ID)
	p := filepath.Join("/sys/fs/cgroup", strings.Split(v1, "/")[0], rel, strings.Split(v1, "/")[1])
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		p = filepath.Join("/sys/fs/cgroup", rel, v2)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestPooledSandboxServesOneJobAndIsGone(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	lim := sandbox.Limits{Timeout: 30 * time.Second}
	p := lightPool(t, m, 2, lim)

	// The first job leaves a file, a process and a token in /tmp.
	sb1 := take(t, p, lim)
	res, err := m.RunIn(context.Background(), sb1, shJob(
		"echo secret > /tmp/left-behind; setsid sleep 600 </dev/null >/dev/null 2>&1 & ls -di /tmp > /tmp/out/inode; echo $$ > /tmp/out/pid", lim))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cs, err := m.Runsc().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.ID == sb1.ID {
			t.Errorf("runsc still lists the used sandbox %s (%s)", c.ID, c.Status)
		}
	}
	for _, sub := range []string{"bundles", "images"} {
		if _, err := os.Stat(filepath.Join(m.Config().StateDir, sub, sb1.ID)); err == nil {
			t.Errorf("%s/%s still exists after the job", sub, sb1.ID)
		}
	}
	for _, ctl := range []string{"memory", "pids", "cpu"} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", ctl, m.Config().CgroupParent, sb1.ID)); err == nil {
			t.Errorf("the %s cgroup of the used sandbox still exists", ctl)
		}
	}

	// The next job, from the same pool, sees none of it.
	waitReady(t, p, 1)
	sb2 := take(t, p, lim)
	if sb2.ID == sb1.ID {
		t.Fatalf("the pool handed out sandbox %s twice", sb1.ID)
	}
	res2, err := m.RunIn(ctx, sb2, shJob(
		"ls /tmp > /tmp/out/tmp; for p in /proc/[0-9]*; do cat $p/cmdline | tr '\\0' ' '; echo; done > /tmp/out/procs", lim))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range res2.Response.Files {
		files[f.Name] = string(f.Data)
	}
	if strings.Contains(files["tmp"], "left-behind") {
		t.Errorf("the second job sees the first job's file: /tmp = %q", files["tmp"])
	}
	if strings.Contains(files["procs"], "sleep 600") {
		t.Errorf("the second job sees the first job's process: %q", files["procs"])
	}
	if len(res.Response.Files) != 2 {
		t.Fatalf("first job's outputs: %v", names(res.Response.Files))
	}
}

func TestIdleSandboxThatDiesIsReplaced(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	lim := sandbox.Limits{Timeout: 30 * time.Second}
	p := lightPool(t, m, 1, lim)
	ctx := context.Background()
	cs, err := m.Runsc().List(ctx)
	if err != nil || len(cs) != 1 {
		t.Fatalf("runsc list = %v, %v; want the one idle sandbox", cs, err)
	}
	dead := cs[0]
	if err := syscall.Kill(dead.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Replaced: a new sandbox is ready, the dead one is gone.
	deadline := time.Now().Add(time.Minute)
	for {
		cs, _ = m.Runsc().List(ctx)
		if len(cs) == 1 && cs[0].ID != dead.ID && p.Idle("light") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: runsc list = %v, idle %d; want one new sandbox", cs, p.Idle("light"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	res, err := m.RunIn(ctx, take(t, p, lim), shJob("echo ok > /tmp/out/ok", lim))
	if err != nil || len(res.Response.Files) != 1 {
		t.Fatalf("a job after the replacement: %v", err)
	}
}

// A sandbox's cgroup allows no swap past its memory limit, read on the
// host: a cold one's, and a pooled one's lowered to its job's.
func TestSandboxesCannotSwap(t *testing.T) {
	t.Parallel()
	if !sandbox.SwapAccounting() {
		t.Fatal("the kernel does not account swap to cgroups, so no swap limit can be read: boot it with swapaccount=1 (v1) or without cgroup.memory=noswap (v2)")
	}
	m := testenv.Manager(t, sandbox.Config{})
	noSwap := func(what string, sb *sandbox.Sandbox, memory int64) {
		t.Helper()
		want := strconv.FormatInt(memory, 10)
		if got := cgroupValue(t, m, sb, "memory/memory.limit_in_bytes", "memory.max"); got != want {
			t.Errorf("%s: memory limit %s, want %s", what, got, want)
		}
		swap, wantSwap := cgroupValue(t, m, sb, "memory/memory.memsw.limit_in_bytes", "memory.swap.max"), want
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
			wantSwap = "0"
		}
		if swap != wantSwap {
			t.Errorf("%s: swap limit %s, want %s: no swap past the memory limit", what, swap, wantSwap)
		}
	}
	cold, err := m.Prepare(context.Background(), sandbox.Limits{MemoryBytes: 384 << 20})
	if err != nil {
		t.Fatal(err)
	}
	noSwap("a cold sandbox", cold, 384<<20)
	if err := cold.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	pool := sandbox.Limits{Timeout: 30 * time.Second, MemoryBytes: 1 << 30}
	p := lightPool(t, m, 1, pool)
	low := pool
	low.MemoryBytes = 256 << 20
	sb := take(t, p, low)
	defer sb.Destroy(context.Background())
	noSwap("a pooled sandbox lowered to its job's limit", sb, 256<<20)
}

// Not parallel: it times a kill.
func TestPooledJobGetsItsLowerLimits(t *testing.T) {
	m := testenv.Manager(t, sandbox.Config{})
	pool := sandbox.Limits{Timeout: 30 * time.Second, MemoryBytes: 1 << 30, Pids: 512, CPUs: 1}
	p := lightPool(t, m, 2, pool)

	// Lowered memory, CPU and pids are in the cgroup before the job runs,
	// and the memory limit holds.
	low := pool
	low.MemoryBytes, low.Pids, low.CPUs = 256<<20, 200, 0.5
	sb := take(t, p, low)
	if got := cgroupValue(t, m, sb, "memory/memory.limit_in_bytes", "memory.max"); got != strconv.Itoa(256<<20) {
		t.Errorf("memory limit = %s, want %d", got, 256<<20)
	}
	if got := cgroupValue(t, m, sb, "pids/pids.max", "pids.max"); got != "200" {
		t.Errorf("pids limit = %s, want 200", got)
	}
	if got := cgroupValue(t, m, sb, "cpu/cpu.cfs_quota_us", "cpu.max"); !strings.HasPrefix(got, "50000") {
		t.Errorf("cpu quota = %s, want 50000", got)
	}
	// perl-base is in every Debian rootfs: a 600 MiB string.
	job := shJob("", low)
	job.Request.Argv = []string{"/usr/bin/perl", "-e", `my $x = "a" x (600*1024*1024); print length($x)`}
	_, err := m.RunIn(context.Background(), sb, job)
	wantOutcome(t, err, sandbox.MemoryLimit)

	// A lower timeout is the host's: kill within a second of it.
	waitReady(t, p, 1)
	low = pool
	low.Timeout = 2 * time.Second
	start := time.Now()
	res, err := m.RunIn(context.Background(), take(t, p, low), shJob("while :; do :; done", low))
	wantOutcome(t, err, sandbox.Timeout)
	if killed := time.Since(start) - res.Timings.Teardown; killed > low.Timeout+time.Second {
		t.Errorf("the pooled sandbox was killed %v after the job started, want within %v + 1s", killed, low.Timeout)
	}

	// Higher limits, or another tmpfs size, never take a pooled sandbox.
	for _, l := range []sandbox.Limits{
		{Timeout: time.Second, MemoryBytes: 2 << 30},
		{Timeout: time.Second, TmpBytes: 64 << 20},
	} {
		if sb, _ := p.Take(context.Background(), "light", l); sb != nil {
			t.Errorf("Take(%+v) gave a sandbox created with %+v", l, sb.Limits)
			_ = sb.Destroy(context.Background())
		}
	}
}

// Not parallel: it times a kill.
func TestPooledJobCanceledWithinASecond(t *testing.T) {
	m := testenv.Manager(t, sandbox.Config{})
	lim := sandbox.Limits{Timeout: 30 * time.Second}
	p := lightPool(t, m, 1, lim)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(1500*time.Millisecond, cancel)
	start := time.Now()
	res, err := m.RunIn(ctx, take(t, p, lim), shJob("sleep 60", lim))
	wantOutcome(t, err, sandbox.Canceled)
	if d := time.Since(start) - res.Timings.Teardown; d > 2500*time.Millisecond {
		t.Errorf("cancel took effect after %v, want within 1s of the cancel at 1.5s", d)
	}
}

// Restored sandboxes come from a checkpoint image that is replaced after
// ImageMaxRestores restores, so no image serves more than that many jobs.
func TestRestoreImagesRotate(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	lim := sandbox.Limits{Timeout: 30 * time.Second}
	var mu sync.Mutex
	images, restored := 0, 0
	p := testenv.PoolWithEvents(t, m, func(e sandbox.PoolEvent) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e.Kind == sandbox.PoolImage:
			images++
		case e.Kind == sandbox.PoolFill && e.Mode == sandbox.ModeRestored:
			restored++
		}
	}, sandbox.PoolFamily{Name: "light", Limits: lim, Size: 1, Restore: true, ImageMaxRestores: 2})
	for i := 0; i < 4; i++ {
		waitReady(t, p, 1)
		sb, mode := p.Take(context.Background(), "light", lim)
		if sb == nil || mode != sandbox.ModeRestored {
			t.Fatalf("job %d: Take = %v, %q; want a restored sandbox", i, sb, mode)
		}
		res, err := m.RunIn(context.Background(), sb, shJob("echo ok > /tmp/out/ok", lim))
		if err != nil || len(res.Response.Files) != 1 {
			t.Fatalf("job %d in a restored sandbox: %v", i, err)
		}
	}
	waitReady(t, p, 1)
	mu.Lock()
	defer mu.Unlock()
	// 5 restores (4 jobs and the one waiting), at most 2 per image.
	if restored < 5 || images < (restored+1)/2 {
		t.Errorf("%d restores from %d images; want at most 2 restores per image", restored, images)
	}
}

// A family restores from Images checkpoint images, each restore picking
// one of those there are at random: restores are spread over them, and no
// more images are made or kept while none is due to retire.
func TestRestoresPickAmongImages(t *testing.T) {
	t.Parallel()
	const images, jobs = 3, 12
	m := testenv.Manager(t, sandbox.Config{})
	lim := sandbox.Limits{Timeout: 30 * time.Second}
	var made atomic.Int32
	p := testenv.PoolWithEvents(t, m, func(e sandbox.PoolEvent) {
		if e.Kind == sandbox.PoolImage {
			made.Add(1)
		}
	}, sandbox.PoolFamily{Name: "light", Limits: lim, Size: 1, Restore: true, Images: images, ImageMaxRestores: 100})
	for i := range jobs {
		waitReady(t, p, 1)
		sb, mode := p.Take(context.Background(), "light", lim)
		if sb == nil || mode != sandbox.ModeRestored {
			t.Fatalf("job %d: Take = %v, %q; want a restored sandbox", i, sb, mode)
		}
		if _, err := m.RunIn(context.Background(), sb, shJob("echo ok > /tmp/out/ok", lim)); err != nil {
			t.Fatalf("job %d in a restored sandbox: %v", i, err)
		}
	}
	waitReady(t, p, 1)
	restores := p.ImageRestores("light")
	dirs, _ := filepath.Glob(filepath.Join(m.Config().StateDir, "images", "light-*"))
	t.Logf("%d images made; restores per image %v; image directories %d", made.Load(), restores, len(dirs))
	if made.Load() != images || len(restores) != images || len(dirs) != images {
		t.Fatalf("%d images made, %d in use, %d on disk; want %d of each", made.Load(), len(restores), len(dirs), images)
	}
	// The first image is made by the first fill, the others in the
	// background while restores go on from those there are: most of the
	// 13 restores pick among several images (all on one: p < 1e-3).
	var picked int
	for _, n := range restores {
		if n > 0 {
			picked++
		}
	}
	if picked < 2 {
		t.Errorf("restores per image %v: every restore picked one image", restores)
	}
	if st := p.Stats(); len(st) != 1 || st[0].Images != images {
		t.Errorf("Stats = %+v, want %d images", st, images)
	}
}

// Each image is retired at a random age between half and all of
// ImageMaxAge, and replaced.
func TestImagesRetireByAge(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	lim := sandbox.Limits{Timeout: 30 * time.Second}
	const maxAge = 4 * time.Second
	var made atomic.Int32
	p := testenv.PoolWithEvents(t, m, func(e sandbox.PoolEvent) {
		if e.Kind == sandbox.PoolImage {
			made.Add(1)
		}
	}, sandbox.PoolFamily{Name: "light", Limits: lim, Size: 1, Restore: true, Images: 1, ImageMaxAge: maxAge, MaxIdle: time.Hour})
	waitReady(t, p, 1)
	start := time.Now()
	for time.Since(start) < 3*maxAge {
		sb, _ := p.Take(context.Background(), "light", lim)
		if sb != nil {
			if _, err := m.RunIn(context.Background(), sb, shJob("true", lim)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	// 12 s of restores, each image retired within 2–4 s of being made.
	if n := made.Load(); n < 3 {
		t.Errorf("%d images made in %s with ImageMaxAge %s, want at least 3", n, time.Since(start).Round(time.Second), maxAge)
	}
}

// A job that can wait does not take a restored sandbox before it has
// settled (its Sentry's clocks calibrated again); one that cannot wait
// (FillWait 0) takes it at once rather than running cold.
func TestRestoredSandboxSettlesBeforeItServes(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	lim := sandbox.Limits{Timeout: 30 * time.Second}
	const settle = 2 * time.Second
	for _, wait := range []time.Duration{0, 10 * time.Second} {
		var mu sync.Mutex
		var filled time.Time
		p := testenv.PoolWithEvents(t, m, func(e sandbox.PoolEvent) {
			if e.Kind == sandbox.PoolFill {
				mu.Lock()
				filled = time.Now()
				mu.Unlock()
			}
		}, sandbox.PoolFamily{Name: "light", Limits: lim, Size: 1, Restore: true, Settle: settle, FillWait: wait})
		waitReady(t, p, 1)
		sb, mode := p.Take(context.Background(), "light", lim)
		took := time.Now()
		mu.Lock()
		after := took.Sub(filled)
		mu.Unlock()
		t.Logf("fill wait %s: took a %q sandbox %s after it was restored", wait, mode, after.Round(time.Millisecond))
		if sb == nil || mode != sandbox.ModeRestored {
			t.Fatalf("fill wait %s: Take = %v, %q; want a restored sandbox", wait, sb, mode)
		}
		switch {
		case wait > 0 && after < settle-50*time.Millisecond:
			t.Errorf("a job that can wait took a restored sandbox %s after its restore, want at least %s", after, settle)
		case wait == 0 && after > settle/2:
			t.Errorf("a job that cannot wait took %s to get the restored sandbox, want it at once", after)
		}
		if _, err := m.RunIn(context.Background(), sb, shJob("true", lim)); err != nil {
			t.Errorf("a job in the settled sandbox: %v", err)
		}
	}
}

// A job that finds its family empty while a fill is under way waits for
// that fill (up to FillWait) instead of running cold; without FillWait it
// runs cold at once.
func TestEmptyFamilyWaitsForTheFillUnderWay(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	lim := sandbox.Limits{Timeout: 30 * time.Second}
	for _, wait := range []time.Duration{0, 30 * time.Second} {
		p := testenv.Pool(t, m, sandbox.PoolFamily{
			Name: "light", Warm: wire.Warm{Kind: wire.WarmNone}, Limits: lim, Size: 1, FillWait: wait,
		})
		waitReady(t, p, 1)
		first := take(t, p, lim)
		// The refill starts as the first Take returns.
		t0 := time.Now()
		second, mode := p.Take(context.Background(), "light", lim)
		t.Logf("fill wait %s: the second Take gave %q after %s", wait, mode, time.Since(t0))
		switch {
		case wait == 0 && second != nil:
			t.Errorf("no fill wait: the second Take gave a %q sandbox, want none (run cold)", mode)
		case wait > 0 && (second == nil || mode != sandbox.ModePrebooted):
			t.Errorf("fill wait %s: the second Take gave %v %q, want the sandbox being filled", wait, second, mode)
		}
		for _, sb := range []*sandbox.Sandbox{first, second} {
			if sb != nil {
				if err := sb.Destroy(context.Background()); err != nil {
					t.Error(err)
				}
			}
		}
	}
}

// Jobs queued on an empty family get its fills one after another: each
// fill that lands starts a job's wait again, so none runs cold while the
// family keeps making sandboxes, however many are ahead of it. (The wait
// once ran from the Take: under load the second job in line ran cold, a
// Chromium boot that slowed every fill behind it.) With a fill taking
// ≈ 0.4 s here, the sixth in line waits ≈ 2.4 s, past FillWait.
func TestQueuedJobsWaitWhileFillsLand(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	lim := sandbox.Limits{Timeout: 30 * time.Second}
	const wait, jobs = 1500 * time.Millisecond, 6
	var mu sync.Mutex
	var fills []time.Time // when each fill landed
	p := testenv.PoolWithEvents(t, m, func(e sandbox.PoolEvent) {
		if e.Kind == sandbox.PoolFill {
			mu.Lock()
			fills = append(fills, time.Now())
			mu.Unlock()
		}
	}, sandbox.PoolFamily{Name: "light", Warm: wire.Warm{Kind: wire.WarmNone}, Limits: lim, Size: 1, FillWait: wait})
	waitReady(t, p, 1)
	first := take(t, p, lim)
	defer first.Destroy(context.Background())

	type taken struct {
		mode string
		at   time.Time
	}
	got := make(chan taken, jobs)
	start := time.Now()
	for range jobs {
		go func() {
			sb, mode := p.Take(context.Background(), "light", lim)
			at := time.Now()
			if sb != nil {
				if err := sb.Destroy(context.Background()); err != nil {
					t.Error(err)
				}
			}
			got <- taken{mode, at}
		}()
	}
	cold := 0
	for range jobs {
		tk := <-got
		if tk.mode != "" {
			continue
		}
		cold++
		// Cold is right only when no fill had landed for FillWait.
		mu.Lock()
		last := start
		for _, f := range fills {
			if f.Before(tk.at) && f.After(last) {
				last = f
			}
		}
		mu.Unlock()
		if gap := tk.at.Sub(last); gap < wait {
			t.Errorf("a job ran cold %s after the last fill landed (%s after the Takes), want a wait of %s after each fill", gap.Round(time.Millisecond), tk.at.Sub(start).Round(time.Millisecond), wait)
		}
	}
	mu.Lock()
	t.Logf("%d jobs in line: %d ran cold; %d fills, the last %s after the Takes", jobs, cold, len(fills), fills[len(fills)-1].Sub(start).Round(time.Millisecond))
	mu.Unlock()
}

// A template runs TemplateWait before it is checkpointed.
func TestTemplateRunsBeforeItsCheckpoint(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	lim := sandbox.Limits{Timeout: 30 * time.Second}
	const wait = 3 * time.Second
	images := make(chan time.Duration, 4)
	p := testenv.PoolWithEvents(t, m, func(e sandbox.PoolEvent) {
		if e.Kind == sandbox.PoolImage {
			images <- e.Duration
		}
	}, sandbox.PoolFamily{Name: "light", Limits: lim, Size: 1, Restore: true, TemplateWait: wait})
	waitReady(t, p, 1)
	d := <-images
	t.Logf("image made in %s", d.Round(time.Millisecond))
	if d < wait {
		t.Errorf("the image was made %s after its template started booting, want at least its TemplateWait (%s)", d, wait)
	}
}

// A family keeps more sandboxes where jobs find it empty, and fewer again
// once they wait out MaxIdle unused: each job that finds none idle grows
// its target by one, up to four times its size; each sandbox evicted for
// idling shrinks it by one, down to its size. Stats and the grow and
// shrink events say so.
func TestFamilySizeFollowsDemand(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	lim := sandbox.Limits{Timeout: 30 * time.Second}
	var mu sync.Mutex
	events := map[sandbox.PoolEventKind]int{}
	const maxIdle = 20 * time.Second // long enough for four fills on a loaded host
	p := testenv.PoolWithEvents(t, m, func(e sandbox.PoolEvent) {
		mu.Lock()
		events[e.Kind]++
		mu.Unlock()
	}, sandbox.PoolFamily{Name: "light", Warm: wire.Warm{Kind: wire.WarmNone}, Limits: lim, Size: 1, MaxIdle: maxIdle})
	target := func() int {
		for _, s := range p.Stats() {
			if s.Name == "light" {
				return s.Target
			}
		}
		return -1
	}
	count := func(k sandbox.PoolEventKind) int { mu.Lock(); defer mu.Unlock(); return events[k] }
	waitReady(t, p, 1)
	destroy := func(sb *sandbox.Sandbox) {
		if sb != nil {
			if err := sb.Destroy(context.Background()); err != nil {
				t.Error(err)
			}
		}
	}
	destroy(take(t, p, lim)) // one was idle: no growth
	if n := target(); n != 1 {
		t.Fatalf("after a hit: target %d, want 1", n)
	}
	// Five jobs at once find it empty (no FillWait: they run cold); the
	// target grows to four, its bound, not five.
	for range 5 {
		sb, _ := p.Take(context.Background(), "light", lim)
		destroy(sb)
	}
	if n, g := target(), count(sandbox.PoolGrow); n != 4 || g != 3 {
		t.Fatalf("after 5 misses: target %d after %d grow events, want 4 after 3", n, g)
	}
	// The fills follow the target.
	waitIdle(t, p, 4, time.Minute)
	// Unused, they wait out MaxIdle and the target comes back to the size.
	deadline := time.Now().Add(4 * maxIdle)
	for target() > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("target %d after %s unused, want 1", target(), 4*maxIdle)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if s := count(sandbox.PoolShrink); s != 3 {
		t.Errorf("%d shrink events, want 3", s)
	}
	if idle := p.Idle("light"); idle > 1 {
		t.Errorf("%d idle once shrunk, want at most 1", idle)
	}
}
