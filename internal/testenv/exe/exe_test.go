package exe

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Scripts written while other goroutines fork all the time run at once:
// the race that os.WriteFile loses now and then is not there to lose.
func TestWrittenScriptsRunWhileOthersFork(t *testing.T) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					_ = exec.Command("/bin/true").Run()
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	dir := t.TempDir()
	for i := range 40 {
		p := filepath.Join(dir, fmt.Sprint("s", i))
		Write(t, p, "#!/bin/sh\necho ok\n")
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o755 {
			t.Fatalf("%s: %v %v, want mode 0755", p, fi, err)
		}
		if out, err := exec.Command(p).Output(); err != nil || string(out) != "ok\n" {
			t.Fatalf("running %s: %q %v", p, out, err)
		}
	}
}
