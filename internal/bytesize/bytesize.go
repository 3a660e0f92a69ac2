// Package bytesize writes a byte count the way messages to people show
// it: in bytes below 1 KiB, else in KiB, MiB or GiB (powers of 1024, as
// the limits are set).
package bytesize

import (
	"fmt"
	"strconv"
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

// Parse reads a size as operators write it: 1536, 512K, 256M, 1.5G
// (powers of 1024).
func Parse(s string) (int64, error) {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("want a size such as 512M or 1.5G")
	}
	return int64(f * mult), nil
}
