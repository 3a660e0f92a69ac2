// Package sandbox runs one job in one single-use gVisor sandbox, and keeps
// sandboxes made ahead of jobs. Nothing a job sends is trusted: the host
// enforces every limit and bounds everything the sandbox says.
//
// Manager (manager.go) owns a host's sandboxes: runsc, a private state
// dir (locked by Lock, cleared of a predecessor's leftovers by Reap) and a
// cgroup parent. Exec runs a job in a fresh sandbox (or one made ahead),
// returns its result, its outcome classified by a pure function
// (classify.go: Outcome, *Error), and destroys the sandbox behind it
// (Teardown); Run and RunIn wait for that too. SelfTest probes real
// sandboxes from inside for the isolation the host promises; the checks a
// worker runs before serving (runsc's version, cgroups, swap, huge pages,
// the self-test with its escape attempts) are put together by package
// hostcheck.
//
// Sandbox (sandbox.go) is one container through its life, New → Created →
// Running → Stopped → Destroyed: Create, Start or Restore, Exchange (the
// request and the answer over its stdio, package wire), Wait, Kill,
// Destroy. Its exported methods are all the pool uses of it.
//
// Pool (pool.go, pool_fill.go, pool_image.go) keeps, per renderer family,
// sandboxes booted or restored from a checkpoint image before any job, and
// refills them in the background; Take hands one to a job. The gate
// (gate.go) counts the jobs rendering, so that fills keep out of their
// way. The pool uses only the exported surface of Manager and Sandbox
// (TestPoolSeams); docs/pool.md has why it works as it does and the
// figures behind its defaults.
//
// The bundle and its spec (spec.go): each sandbox's OCI config.json,
// built by BuildSpec from SpecOptions: the rootfs shared read-only, an
// empty network namespace, and the cgroup (cgroup.go, delegate.go) that
// charges its memory, CPU and pids. Runsc (runsc.go, locate.go) wraps
// the runsc binary's commands.
//
// Restore and adopt: a restored sandbox is made by `runsc restore` from an
// image the pool checkpointed; this process is the subreaper of every
// sandbox process runsc starts (adopt.go), and learns each one's end from
// wait4.
//
// Limits (jobspec.Limits, resolved by the catalogue) are a job's memory,
// CPU, pids, time, tmpfs and output caps; the cgroup ones may be lowered
// on a sandbox made with higher ones (Sandbox.Lower), the ones fixed in
// the spec may not.
package sandbox
