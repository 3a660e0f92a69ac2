package hostcheck

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/rootfs"
)

// A rootfs passes while young, is warned about past RootfsWarnAge and is
// refused only past a -rootfs-max-age that is set.
func TestRootfsAge(t *testing.T) {
	now := time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		age, maxAge time.Duration
		verdict     string
		refused     bool
	}{
		{age: 24 * time.Hour, verdict: "PASS"},
		{age: RootfsWarnAge + time.Hour, verdict: "WARN"},
		{age: 30 * 24 * time.Hour, maxAge: 14 * 24 * time.Hour, verdict: "FAIL", refused: true},
		{age: 10 * 24 * time.Hour, maxAge: 14 * 24 * time.Hour, verdict: "WARN"},
	} {
		var got []string
		rep := func(verdict, name, detail string, _ int) { got = append(got, verdict+" "+name+": "+detail) }
		err := rootfsAge(rep, &rootfs.Manifest{PackagesAt: now.Add(-c.age)}, c.maxAge, now)
		want := fmt.Sprintf("%s rootfs age: packages fetched %.1f days ago", c.verdict, c.age.Hours()/24)
		if len(got) != 1 || !strings.HasPrefix(got[0], want) || (err != nil) != c.refused {
			t.Errorf("age %s, max %s: got %q, err %v; want one line %q, refused %v", c.age, c.maxAge, got, err, want, c.refused)
		}
	}
}
