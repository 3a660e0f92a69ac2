package sandbox

import (
	"fmt"
	"os"
	"regexp"
)

// thpDir holds the host's transparent huge page settings.
const thpDir = "/sys/kernel/mm/transparent_hugepage"

// HugePages reports whether runsc will back sandboxes' memory with huge
// pages on this host, and why. runsc asks for them (its -app-huge-pages is
// on by default) only when the host's shmem_enabled is always or
// within_size, or advise with defrag always, defer or never; without them
// memory-heavy renderers run several times slower (docs/pool.md,
// "Figures"). scripts/setup.sh sets shmem_enabled=advise and
// defrag=defer; deploy/tmpfiles.d does at boot.
func HugePages() (bool, string) {
	shmem, err1 := thpSetting("shmem_enabled")
	defrag, err2 := thpSetting("defrag")
	if err1 != nil || err2 != nil {
		return false, fmt.Sprintf("host THP settings unreadable (%v %v)", err1, err2)
	}
	detail := fmt.Sprintf("shmem_enabled=%s defrag=%s", shmem, defrag)
	if runscUsesHugePages(shmem, defrag) {
		return true, detail
	}
	return false, detail + ": sandboxed renderers fault in small pages, several times slower on memory-heavy work; " +
		"set shmem_enabled=advise and defrag=defer (scripts/setup.sh, deploy/tmpfiles.d)"
}

// runscUsesHugePages is runsc's rule (runsc/boot/loader.go,
// createMemoryFile) for the pinned version.
func runscUsesHugePages(shmem, defrag string) bool {
	switch shmem {
	case "always", "within_size":
		return true
	case "advise":
		return defrag == "always" || defrag == "defer" || defrag == "never"
	}
	return false
}

var thpChoice = regexp.MustCompile(`\[([a-z_+]+)\]`)

// thpSetting returns the selected value of a THP setting file, which lists
// the choices with the selected one in brackets.
func thpSetting(name string) (string, error) {
	b, err := os.ReadFile(thpDir + "/" + name)
	if err != nil {
		return "", err
	}
	return selectedTHP(name, b)
}

func selectedTHP(name string, b []byte) (string, error) {
	m := thpChoice.FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("%s: no selected value in %q", name, b)
	}
	return string(m[1]), nil
}
