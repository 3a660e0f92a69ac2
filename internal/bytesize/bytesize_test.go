package bytesize

import "testing"

func TestString(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 bytes", 1: "1 byte", 1023: "1023 bytes", 1024: "1 KiB", 8 << 10: "8 KiB",
		1536: "1.5 KiB", 40 << 20: "40 MiB", 40<<20 + 1: "40.0 MiB (41943041 bytes)",
		40<<20 + 300<<10: "40.3 MiB", 1<<20 - 1: "1024.0 KiB (1048575 bytes)",
		3 << 29: "1.5 GiB", 2 << 40: "2 TiB", 1 << 50: "1024 TiB", -5: "-5 bytes",
	} {
		if got := String(n); got != want {
			t.Errorf("String(%d) = %q, want %q", n, got, want)
		}
	}
}
