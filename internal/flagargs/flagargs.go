// Package flagargs parses a command line whose flags may stand before or
// after its arguments (renderbox render FILE -o DIR, api keys create NAME
// -db F), where package flag stops at the first argument.
package flagargs

import "flag"

// Parse parses the flags in args into fs wherever they stand and returns
// the arguments in order; after "--" everything is an argument. Errors are
// fs.Parse's (flag.ErrHelp for -h).
func Parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var tail []string
	for i, a := range args {
		if a == "--" {
			args, tail = args[:i], args[i+1:]
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if args = fs.Args(); len(args) == 0 {
			return append(pos, tail...), nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}
