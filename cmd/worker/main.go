// Command worker runs render jobs in fresh gVisor sandboxes.
//
//	worker serve                 the start-up checks, then take jobs from the queue
//	worker check                 run the start-up checks and the self-test
//	worker selftest              print each isolation property with PASS/FAIL
//	worker render -r NAME IN -o DIR
//	                             render a local file through a real sandbox
//	worker reap                  delete sandboxes a crashed worker left
//	worker rootfs seal|verify    write or check a rootfs manifest
//	worker rootfs export|import  pack a built rootfs into one archive, or
//	                             install one on a host that builds none
//
// There is no unsandboxed fallback: every command that renders refuses to
// run without a working runsc, cgroups and a rootfs.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: worker <command> [flags]

commands:
  serve      run the start-up checks, then take render jobs from Redis until SIGTERM
  check      run the start-up checks (runsc, cgroups, rootfs digest, reap, self-test)
  selftest   run the isolation probe in a real sandbox and print PASS/FAIL per property
  render     render a local file: worker render -renderer pdf-png in.pdf -o outdir/
  reap       delete sandboxes, bundles and cgroups a crashed worker left behind
  rootfs     seal or verify a rootfs tree: worker rootfs seal|verify DIR
             pack it for other hosts: worker rootfs export -o OUTDIR [TREE]
             install a packed one: worker rootfs import [-sha256 HEX] [-dir DIR] ARCHIVE

Run "worker <command> -h" for its flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	args := os.Args[2:]
	switch os.Args[1] {
	case "serve":
		err = cmdServe(ctx, args)
	case "check":
		err = cmdCheck(ctx, args)
	case "selftest":
		err = cmdSelftest(ctx, args)
	case "render":
		err = cmdRender(ctx, args)
	case "reap":
		err = cmdReap(ctx, args)
	case "rootfs":
		err = cmdRootfs(ctx, args)
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "worker: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: %v\n", err)
		os.Exit(1)
	}
}
