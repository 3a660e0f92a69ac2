// Package envflag gives every flag of a command a RENDERBOX_… environment
// variable of the same name — -metrics-addr is RENDERBOX_METRICS_ADDR —
// so a setting has one name whether a command line, a systemd
// EnvironmentFile or a shell sets it. A flag on the command line wins over
// its variable; an empty variable counts as unset (give the flag for an
// empty value, as in -metrics-addr ""). The names once spelled otherwise
// stay readable as deprecated aliases, with a warning for the log.
package envflag

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
)

// Prefix starts every variable.
const Prefix = "RENDERBOX_"

// Var is the environment variable of the flag named name.
func Var(name string) string {
	return Prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Deprecated is an old variable that is still read for a flag.
type Deprecated struct {
	Var  string // the old name, e.g. RENDERBOX_WORKER_METRICS
	Flag string // the flag it sets, e.g. metrics-addr
}

// Use says what to write instead of d.Var.
func (d Deprecated) Use() string { return Var(d.Flag) }

// Apply sets each flag of fs that the command line (already parsed) did
// not give from its variable, or else from a deprecated alias; flags in
// skip are a command's arguments, not settings (render's -renderer), and
// have none. It returns the aliases that were used, for the caller to warn
// about once it has a logger. A value its flag refuses is an error naming
// the variable. Values are set on the flags directly, not through
// fs.Set, so fs.Visit still tells what the command line gave.
func Apply(fs *flag.FlagSet, aliases []Deprecated, skip ...string) ([]Deprecated, error) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, s := range skip {
		given[s] = true
	}
	var errs []string
	set := func(f *flag.Flag, name, v string) {
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q: invalid value for -%s: %v", name, v, f.Name, err))
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		if v := os.Getenv(Var(f.Name)); v != "" {
			set(f, Var(f.Name), v)
			given[f.Name] = true
		}
	})
	var used []Deprecated
	for _, a := range aliases {
		f := fs.Lookup(a.Flag)
		v := os.Getenv(a.Var)
		if f == nil || v == "" {
			continue
		}
		used = append(used, a)
		if !given[a.Flag] {
			set(f, a.Var, v)
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return used, fmt.Errorf("config: %s", strings.Join(errs, "; "))
	}
	return used, nil
}
