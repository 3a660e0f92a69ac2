package bench

import "testing"

// A round trip is at least four system calls (two writes, two reads) and
// two wake-ups, so it costs more than four of the cheapest system call;
// a mix-up of units or a read that does not block would show here.
func TestHostCostsAreConsistent(t *testing.T) {
	// Other test binaries share the cores in `go test ./...`: a burst of
	// them during every round of the system-call loop makes one call
	// look dearer than it is. Three measures, any one consistent.
	var got []hostCosts
	for range 3 {
		h, err := measureHost()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("cores %d, getppid %.0f ns, thread round trip %.2f µs", h.Cores, h.SyscallNs, h.SwitchUs)
		if h.Cores >= 1 && h.SyscallNs > 0 && h.SwitchUs*1000 > 4*h.SyscallNs {
			return
		}
		got = append(got, h)
	}
	t.Errorf("got %+v: want cores ≥ 1, a system call > 0 ns and a round trip above four system calls", got)
}
