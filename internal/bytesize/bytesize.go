// Package bytesize writes a byte count the way messages to people show
// it: in bytes below 1 KiB, else in KiB, MiB or GiB (powers of 1024, as
// the limits are set).
package bytesize

import (
	"fmt"
	"strings"
)

// String says n bytes for a person: "512 bytes", "8 KiB", "40 MiB",
// "1.5 GiB". A count that is not a whole number of its unit gets one
// decimal; one that would still read as whole ("40.0 MiB" for a byte
// over 40 MiB) keeps its exact count beside it, so that a size just over
// a limit never reads as the limit itself.
func String(n int64) string {
	if n < 0 {
		return fmt.Sprintf("%d bytes", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	if n < 1<<10 {
		if n == 1 {
			return "1 byte"
		}
		return fmt.Sprintf("%d bytes", n)
	}
	u, div := 0, int64(1<<10)
	for u < len(units)-1 && n >= div<<10 {
		u, div = u+1, div<<10
	}
	if n%div == 0 {
		return fmt.Sprintf("%d %s", n/div, units[u])
	}
	s := fmt.Sprintf("%.1f", float64(n)/float64(div))
	if strings.HasSuffix(s, ".0") {
		return fmt.Sprintf("%s %s (%d bytes)", s, units[u], n)
	}
	return s + " " + units[u]
}
