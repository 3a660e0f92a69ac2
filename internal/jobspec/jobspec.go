// Package jobspec holds the plain values a render job is described by —
// its limits and their defaults, the job itself, the families of pooled
// sandboxes and the modes a sandbox comes in — so that the catalogue
// (internal/render) and the API can name them without linking the sandbox
// runtime (internal/sandbox, runsc, OCI) that enforces them.
package jobspec

import (
	"io"
	"time"

	"github.com/renderbox/renderbox/internal/wire"
)

// AttemptSlack is what one attempt of a job may take beyond its
// Limits.Timeout: the sandbox's set-up and tear-down, and the stages and
// checks around it. The API gives asynq Timeout plus this as the task's
// deadline, so no attempt outlives it; a worker's drain
// (-shutdown-timeout) that lasts this long lets every running job end.
const AttemptSlack = 2 * time.Minute

// Limits bound one job: its sandbox (the sandbox manager enforces Timeout
// and the output caps; the rest go into the OCI spec as cgroup limits,
// rlimits and mount options) and the host's checks of what it makes
// (MaxPages, MaxPixels).
type Limits struct {
	// Timeout is the wall time from start to result, enforced by the host
	// (kill, then the teardown). Default 60s.
	Timeout time.Duration
	// MemoryBytes is the cgroup memory limit of the whole sandbox, the
	// user-space kernel included. Default 1 GiB.
	MemoryBytes int64
	// CPUs is the CPU quota in cores. Default 1.
	CPUs float64
	// Pids is the cgroup pids limit. It counts the sandbox's host threads and
	// processes (the Sentry's included), not only the renderer's. Default 512.
	Pids int64
	// TmpBytes caps the /tmp tmpfs, which holds the input, the scratch space
	// and the outputs. Default 256 MiB.
	TmpBytes int64
	// MaxOutputBytes and MaxOutputFiles cap what is read back. Defaults
	// 64 MiB and 1000 files.
	MaxOutputBytes int64
	MaxOutputFiles int
	// NoFile is RLIMIT_NOFILE inside. Default 1024.
	NoFile uint64
	// NProc is RLIMIT_NPROC inside: the tasks (threads and processes) the
	// renderer's uid may hold. gVisor enforces it with EAGAIN, a clean
	// failure inside the sandbox; the host's pids limit, hit first, would
	// end the whole sandbox instead. Default: what Pids leaves room for
	// (see tasksFor).
	NProc uint64
	// MaxPages and MaxPixels bound what the host accepts of a renderer's
	// pages and images, for the renderers that set them; the sandbox
	// ignores them. No default: 0 means the renderer has no such bound.
	MaxPages  int
	MaxPixels int64
}

// WithDefaults fills zero fields with their defaults. The catalogue and
// the sandbox manager's configuration resolve their limits with it once;
// everything they hand on is already resolved.
func (l Limits) WithDefaults() Limits {
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	if l.Timeout == 0 {
		l.Timeout = 60 * time.Second
	}
	def(&l.MemoryBytes, 1<<30)
	def(&l.Pids, 512)
	def(&l.TmpBytes, 256<<20)
	def(&l.MaxOutputBytes, 64<<20)
	if l.CPUs == 0 {
		l.CPUs = 1
	}
	if l.MaxOutputFiles == 0 {
		l.MaxOutputFiles = 1000
	}
	if l.NoFile == 0 {
		l.NoFile = 1024
	}
	if l.NProc == 0 {
		l.NProc = tasksFor(l.Pids)
	}
	return l
}

// sentryTasks is what tasksFor leaves for the host tasks a sandbox holds
// before its renderer starts any (the Sentry's threads, the gofer, the
// agent): measured about 30, doubled for margin.
const sentryTasks = 64

// tasksFor is the largest RLIMIT_NPROC whose every task fits under a host
// pids limit of pids: under systrap each sandboxed process costs two host
// tasks (measured: 400 sleeping processes held 832), so a renderer that
// exhausts its tasks hits EAGAIN before the host limit could end the
// sandbox.
func tasksFor(pids int64) uint64 {
	return uint64(max(16, (pids-sentryTasks)/2))
}

// Job is one request to run in a sandbox.
type Job struct {
	Request wire.Request
	Input   io.Reader
	// Spool, if set, takes the response's files as they arrive: the
	// Result's Response then lists them without their bytes.
	Spool wire.Spool
	// Broker, when set, answers the fetches of a URL page (wire.Browser's
	// URL) on the host; a URL page without one has every request refused.
	Broker wire.Broker
	// Limits for this job; zero fields take the manager's defaults.
	Limits Limits
}

// Modes a job's sandbox came from.
const (
	ModeCold      = "cold"      // created and started for the job
	ModePrebooted = "prebooted" // booted from nothing before the job
	ModeRestored  = "restored"  // restored from a checkpoint of a booted one
	// The unsafe benchmark floor (worker serve -unsafe-native-bench): the
	// same agent and renderer as a native process, no gVisor.
	ModeNativeWarm = "native-warm" // booted natively before the job
	ModeNativeCold = "native-cold" // started natively for the job
)

// AgentPath is where rootfs/build.sh installs the agent.
const AgentPath = "/usr/local/bin/renderbox-agent"

// Family configures the pool of one renderer family: sandboxes started
// ahead of any job, each with its renderer booted to an idle state, waiting
// for exactly one request. Each still serves one job and is destroyed.
type Family struct {
	// Name is the family ("chromium", "office", "light").
	Name string
	// Warm is what each sandbox's agent boots before its request.
	Warm wire.Warm
	// Limits are the sandboxes' limits. A job may take one when its own
	// limits fit: the cgroup ones (memory, CPU, pids) no higher, the ones
	// fixed in the spec (tmpfs size, rlimits) equal. The cgroup ones are
	// lowered to the job's before its request is sent.
	Limits Limits
	// Size is how many idle sandboxes are kept ready; 0 disables the pool.
	Size int
	// MemoryBudget bounds the memory the family's idle sandboxes hold, as
	// their cgroups charge it; 0 means no bound beyond Size.
	MemoryBudget int64
	// MaxIdle is how long a sandbox may wait for a job before it is
	// destroyed and replaced. Default 10 minutes.
	MaxIdle time.Duration
	// Restore fills the pool by restoring a checkpoint of one booted
	// sandbox instead of booting each.
	Restore bool
	// Images is how many checkpoint images of the family are in use at
	// once; each restore picks one of them at random. Every sandbox
	// restored from one image starts with the same memory (its layout,
	// every random state seeded before the checkpoint): a job that learns
	// one sandbox's layout knows that of about 1 in Images of the next.
	// Default DefaultImages.
	Images int
	// ImageMaxAge and ImageMaxRestores bound how long and how often one
	// image is used before it is retired and a fresh one booted and
	// taken. Each image is retired at an age drawn between half and all
	// of ImageMaxAge, so that images made together are not replaced
	// together. Defaults 10 minutes and 100 restores.
	ImageMaxAge      time.Duration
	ImageMaxRestores int
	// Settle is how long a restored sandbox waits before a job that can
	// wait takes it: gVisor restarts its clock calibration on restore,
	// and until its first update a second later every clock_gettime of
	// the renderer is a system call the Sentry serves rather than a vDSO
	// read. Worth it for a renderer that reads the clock often
	// (Chromium); 0, and for booted sandboxes, ready when filled.
	Settle time.Duration
	// TemplateWait is how long a booted template runs on before it is
	// checkpointed: every sandbox restored from the image resumes what
	// the renderer was doing when it was saved, and pays for it again.
	// 0 checkpoints it as soon as it is ready.
	TemplateWait time.Duration
	// FillWait is how long a job that finds the family empty waits for a
	// fill under way (or starting) before it runs cold. Each fill that
	// lands starts the wait again, even when another job takes it: a job
	// runs cold only when the family has made nothing for FillWait. Worth
	// it where a fill is quicker and cheaper than a cold job (a restore);
	// 0 never waits.
	FillWait time.Duration
}

// DefaultImages and DefaultImageMaxRestores are the pool's defaults for
// Family.Images and ImageMaxRestores (docs/security.md, "What restored
// sandboxes share", has the figures they were chosen from).
const (
	DefaultImages           = 2
	DefaultImageMaxRestores = 100
)
