package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/renderbox/renderbox/client"
)

// width is the most columns renderbox renderers prints.
const width = 100

func renderersFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	return func(ctx context.Context, s *env, args []string) error {
		c, err := s.client()
		if err != nil {
			return err
		}
		rs, err := c.Renderers(ctx)
		if err != nil {
			return err
		}
		if len(args) == 0 {
			listRenderers(s.stdout, rs)
			return nil
		}
		for _, r := range rs {
			if r.Name == args[0] {
				describeRenderer(s.stdout, r)
				return nil
			}
		}
		var names []string
		for _, r := range rs {
			names = append(names, r.Name)
		}
		return usageError(fmt.Sprintf("no renderer %q; there are: %s", args[0], strings.Join(names, ", ")))
	}
}

// short is a media type without its usual prefix: pdf, png, html.
func short(mediaType string) string {
	for _, p := range []string{"application/", "image/", "text/"} {
		mediaType = strings.TrimPrefix(mediaType, p)
	}
	return strings.TrimSuffix(mediaType, "+xml")
}

func listRenderers(w io.Writer, rs []client.Renderer) {
	nameW := len("NAME")
	for _, r := range rs {
		nameW = max(nameW, len(r.Name))
	}
	head := fmt.Sprintf("%-*s  %-6s  %-7s  ", nameW, "NAME", "OUTPUT", "OPTIONS")
	fmt.Fprintln(w, head+"DESCRIPTION")
	for _, r := range rs {
		// The description's first sentence, wrapped in its column.
		var b strings.Builder
		wrap(&b, "", firstSentence(r.Description), width-len(head))
		for i, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			if i == 0 {
				fmt.Fprintf(w, "%-*s  %-6s  %-7d  %s\n", nameW, r.Name, short(r.Output), len(r.Options), l)
			} else {
				fmt.Fprintf(w, "%*s%s\n", len(head), "", l)
			}
		}
	}
	fmt.Fprintln(w, "\nrenderbox renderers NAME shows a renderer's inputs, limits and options.")
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i > 0 {
		return s[:i+1]
	}
	return s
}

// cut shortens s to n columns (runes), ending it with … when cut.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// wrap fills text into lines of at most n columns, each after indent; a
// word longer than a line is split.
func wrap(w io.Writer, indent string, text string, n int) {
	room := n - len([]rune(indent))
	line := ""
	flush := func() {
		fmt.Fprintln(w, strings.TrimRight(indent+line, " "))
		line = ""
	}
	for _, word := range strings.Fields(text) {
		for len([]rune(word)) > room {
			if line != "" {
				flush()
			}
			r := []rune(word)
			line = string(r[:room])
			flush()
			word = string(r[room:])
		}
		switch {
		case line == "":
			line = word
		case len([]rune(line))+1+len([]rune(word)) <= room:
			line += " " + word
		default:
			flush()
			line = word
		}
	}
	if line != "" {
		flush()
	}
}

// bounds says what values an option takes beyond its type.
func bounds(o client.Option) string {
	num := func(p *float64) string { return strconv.FormatFloat(*p, 'f', -1, 64) }
	var b []string
	switch {
	case o.Minimum != nil && o.Maximum != nil:
		b = append(b, num(o.Minimum)+" to "+num(o.Maximum))
	case o.Minimum != nil:
		b = append(b, "at least "+num(o.Minimum))
	case o.Maximum != nil:
		b = append(b, "at most "+num(o.Maximum))
	}
	if len(o.Enum) > 0 {
		e := "one of " + strings.Join(o.Enum, ", ")
		if o.CaseInsensitive {
			e += " (any case)"
		}
		b = append(b, e)
	}
	if o.MaxLength > 0 {
		b = append(b, fmt.Sprintf("at most %d bytes", o.MaxLength))
	}
	if o.Pattern != "" && !o.Secret && len(o.Enum) == 0 {
		b = append(b, "matching "+o.Pattern)
	}
	if o.Secret {
		b = append(b, "secret: shown nowhere")
	}
	return strings.Join(b, "; ")
}

func describeRenderer(w io.Writer, r client.Renderer) {
	fmt.Fprintf(w, "%s: %s\n", r.Name, short(r.Output))
	wrap(w, "  ", r.Description, width)
	var in []string
	for _, t := range r.Inputs {
		in = append(in, short(t))
	}
	fmt.Fprintln(w)
	wrap(w, "  ", "inputs: "+strings.Join(in, ", "), width)
	wrap(w, "  ", "largest input: "+size(r.MaxInputBytes), width)
	if len(r.Limits) > 0 {
		var ls []string
		for _, k := range []string{"timeout_seconds", "memory_bytes", "cpus", "max_output_bytes", "max_output_files"} {
			if v, ok := r.Limits[k]; ok {
				s := fmt.Sprint(v)
				if f, ok := v.(float64); ok && strings.HasSuffix(k, "_bytes") {
					s = size(int64(f))
				}
				ls = append(ls, k+"="+s)
			}
		}
		wrap(w, "  ", "limits (lower with -limit NAME=VALUE): "+strings.Join(ls, ", "), width)
	}
	if len(r.Options) == 0 {
		fmt.Fprintln(w, "\n  no options")
		return
	}
	fmt.Fprintln(w, "\noptions (-opt NAME=VALUE):")
	for _, o := range r.Options {
		head := fmt.Sprintf("  %s  %s", o.Name, o.Type)
		if o.Default != nil {
			d, _ := json.Marshal(o.Default)
			head += "  default " + string(d)
		}
		fmt.Fprintln(w, cut(head, width))
		if b := bounds(o); b != "" {
			wrap(w, "      ", b, width)
		}
		wrap(w, "      ", o.Description, width)
	}
}

// size is n bytes in KiB, MiB or GiB when it is that large.
func size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', -1, 64) + " MiB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', -1, 64) + " KiB"
	}
	return fmt.Sprintf("%d bytes", n)
}
