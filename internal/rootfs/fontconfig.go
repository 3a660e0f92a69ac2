package rootfs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Every program that uses fontconfig (pdftoppm for a PDF whose fonts are
// not embedded, rsvg-convert, dot, Chromium, LibreOffice) reads its whole
// configuration when it starts: Debian's fonts.conf includes conf.d, some
// fifty files reached through symlinks, and fontconfig also parses every
// file of its template directory only to list their descriptions. In a
// sandbox each of those opens, stats and reads is a round trip to the
// Sentry: a pdftoppm start makes ≈1,440 system calls, ≈800 of them
// fontconfig's. FlattenFontconfig makes that one file.

// FontconfigRecordPath is where, in a tree's rootfs, FlattenFontconfig
// records what fontconfig matched under Debian's configuration: the
// queries, and a digest of each answer, which the flattened configuration
// gives too. Tests ask the same inside a sandbox.
const FontconfigRecordPath = "usr/share/renderbox/fontconfig.json"

// fontconfigTemplateDir is FC_TEMPLATEDIR, which fontconfig parses on
// every start to list the configurations one could enable (fc-conflist).
const fontconfigTemplateDir = "usr/share/fontconfig/conf.avail"

// FontconfigQuery is one fontconfig question and a digest of its answer.
type FontconfigQuery struct {
	Argv   []string `json:"argv"`
	SHA256 string   `json:"sha256"`
	// First is, for people, the answer's first line naming a file (the
	// font matched), or its first line.
	First string `json:"first"`
}

// fontconfigQueries are what the record asks: every pattern's full match
// (file, family, style and every property the configuration edits:
// hinting, antialiasing, synthetic bold, the aliases' bindings), the
// fallback order of the generic families, and every font fontconfig knows.
func fontconfigQueries() [][]string {
	var q [][]string
	for _, p := range []string{
		"Helvetica", "Helvetica:bold", "Times-Roman", "Times:italic", "Courier", "Symbol", "ZapfDingbats",
		"Arial", "Arial:bold:italic", "Times New Roman", "Courier New", "Calibri", "Cambria", "Georgia",
		"Verdana", "Comic Sans MS", "Liberation Mono:italic", "DejaVu Sans:bold", "DejaVu Sans:size=6",
		"OpenSymbol", "Noto Sans CJK JP", "Noto Color Emoji", "Unifont",
		"sans-serif", "serif", "monospace", "system-ui", "cursive", "fantasy", "emoji", "math",
		":lang=ja", ":lang=zh-cn", ":lang=zh-tw", ":lang=ko", ":lang=ar", ":lang=fa", ":lang=he",
		":lang=hi", ":lang=th", ":lang=ru", ":lang=el", "sans-serif:weight=200", "serif:slant=100",
		"monospace:pixelsize=9", "NoSuchFamily",
	} {
		q = append(q, []string{"/usr/bin/fc-match", "-v", p})
	}
	for _, p := range []string{"sans-serif", "serif", "monospace", "emoji", ":lang=ja"} {
		q = append(q, []string{"/usr/bin/fc-match", "-s", "-f", "%{file}:%{index}\n", p})
	}
	return append(q, []string{"/usr/bin/fc-list", "-f", "%{file}:%{index}:%{family}:%{style}:%{lang}\n"})
}

// FlattenFontconfig rewrites the fontconfig configuration of tree's rootfs
// as one fonts.conf: Debian's, with every include of the system's
// configuration replaced by the files it names (conf.d's in their order),
// and without what a renderer in a sandbox never has — per-user
// configuration, fonts and caches (a sandbox's home is empty and its own).
// conf.d and the template directory go. fontconfig must then answer
// every query of fontconfigQueries exactly as before, or FlattenFontconfig
// fails; the answers are recorded at FontconfigRecordPath. Run it on a
// tree being built, before its font caches are made and it is sealed.
func FlattenFontconfig(tree string) error {
	root := Dir(tree)
	before, err := askFontconfig(root)
	if err != nil {
		return fmt.Errorf("fontconfig, before flattening: %w", err)
	}
	conf := filepath.Join(root, "etc/fonts/fonts.conf")
	orig, err := os.ReadFile(conf)
	if err != nil {
		return err
	}
	f := &flattener{root: root}
	flat, err := f.flatten(orig, "/etc/fonts/fonts.conf", 0)
	if err != nil {
		return fmt.Errorf("flattening fonts.conf: %w", err)
	}
	header := "<!-- renderbox: Debian's fonts.conf with the system's configuration inlined\n" +
		"     (" + strings.Join(f.files, "\n      ") + ")\n" +
		"     and without per-user configuration, fonts and caches; made by\n" +
		"     worker rootfs fontconfig (internal/rootfs/fontconfig.go). -->\n"
	out := slices.Concat(flat.prolog, []byte(header), flat.open, flat.inner, flat.close)
	if err := os.WriteFile(conf+".tmp", out, 0o644); err != nil {
		return err
	}
	if err := os.Rename(conf+".tmp", conf); err != nil {
		return err
	}
	for _, d := range []string{"etc/fonts/conf.d", fontconfigTemplateDir} {
		if err := os.RemoveAll(filepath.Join(root, d)); err != nil {
			return err
		}
	}
	after, err := askFontconfig(root)
	if err != nil {
		return fmt.Errorf("fontconfig, after flattening: %w", err)
	}
	for i := range before {
		if before[i].SHA256 != after[i].SHA256 {
			return fmt.Errorf("the flattened fontconfig answers %q with %q (sha256 %.12s), Debian's with %q (%.12s)",
				strings.Join(before[i].Argv[1:], " "), after[i].First, after[i].SHA256, before[i].First, before[i].SHA256)
		}
	}
	b, err := json.MarshalIndent(after, "", "  ")
	if err != nil {
		return err
	}
	rec := filepath.Join(root, FontconfigRecordPath)
	if err := os.MkdirAll(filepath.Dir(rec), 0o755); err != nil {
		return err
	}
	return os.WriteFile(rec, append(b, '\n'), 0o644)
}

// askFontconfig runs fontconfigQueries in a chroot of root, with no home.
func askFontconfig(root string) ([]FontconfigQuery, error) {
	var out []FontconfigQuery
	for _, argv := range fontconfigQueries() {
		cmd := exec.Command("chroot", append([]string{root}, argv...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "LANG=C.UTF-8"}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
		}
		if stderr.Len() > 0 { // fontconfig's complaints about its configuration
			return nil, fmt.Errorf("%s: %s", strings.Join(argv, " "), strings.TrimSpace(stderr.String()))
		}
		out = append(out, FontconfigAnswer(argv, stdout.Bytes()))
	}
	return out, nil
}

// FontconfigAnswer is the record of argv answered with stdout, made
// comparable across hosts and sandboxes: fc-list's lines are sorted (its
// order is the caches', not a promise), and a full match (-v) loses its
// element count and the program's name, which fontconfig reads from /proc
// (a sandbox has it, the build's chroot does not).
func FontconfigAnswer(argv []string, stdout []byte) FontconfigQuery {
	lines := strings.SplitAfter(string(stdout), "\n")
	switch {
	case path.Base(argv[0]) == "fc-list":
		slices.Sort(lines)
	case slices.Contains(argv, "-v"):
		lines = slices.DeleteFunc(lines, func(l string) bool {
			return strings.HasPrefix(l, "Pattern has ") || strings.HasPrefix(strings.TrimSpace(l), "prgname:")
		})
	}
	norm := strings.Join(lines, "")
	sum := sha256.Sum256([]byte(norm))
	first, _, _ := strings.Cut(strings.TrimSpace(norm), "\n")
	for _, l := range lines {
		if strings.Contains(l, "file:") {
			first = strings.TrimSpace(l)
			break
		}
	}
	return FontconfigQuery{Argv: argv, SHA256: hex.EncodeToString(sum[:]), First: first}
}

// flattener inlines a tree's fontconfig includes.
type flattener struct {
	root  string
	files []string // inlined, in order
}

// flatDoc is a flattened fontconfig file in its parts: what precedes the
// root element (XML declaration, DOCTYPE, comments), <fontconfig>, what
// it holds, and </fontconfig> with what follows.
type flatDoc struct {
	prolog, open, inner, close []byte
}

// flatten returns doc (the fontconfig file at name, a path in the tree)
// with its top-level includes replaced by what they name and its per-user
// elements removed. Everything else is kept byte for byte.
func (f *flattener) flatten(doc []byte, name string, depth int) (*flatDoc, error) {
	if depth > 8 {
		return nil, fmt.Errorf("%s: includes nested too deep", name)
	}
	type span struct {
		start, end int64
		with       []byte
	}
	var cut []span
	// The root element's start tag and end tag.
	rootStart, innerStart, innerEnd := int64(-1), int64(-1), int64(-1)
	d := xml.NewDecoder(bytes.NewReader(doc))
	d.Strict = true
	level := 0
	for {
		off := d.InputOffset()
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			level++
			if level == 1 {
				if t.Name.Local != "fontconfig" {
					return nil, fmt.Errorf("%s: the root element is <%s>, not <fontconfig>", name, t.Name.Local)
				}
				rootStart, innerStart = off, d.InputOffset()
			}
			if level != 2 || (t.Name.Local != "include" && t.Name.Local != "dir" && t.Name.Local != "cachedir") {
				continue
			}
			text, err := elementText(d)
			if err != nil {
				return nil, fmt.Errorf("%s: <%s>: %w", name, t.Name.Local, err)
			}
			level--
			s := span{start: off, end: d.InputOffset()}
			attrs := map[string]string{}
			for _, a := range t.Attr {
				attrs[a.Name.Local] = a.Value
			}
			user := attrs["prefix"] == "xdg" || strings.HasPrefix(text, "~")
			switch {
			case user: // a sandbox has no per-user configuration, fonts or caches
				s.with = []byte("<!-- renderbox: per-user <" + t.Name.Local + "> " + text + " removed -->")
			case t.Name.Local != "include":
				continue
			default:
				if p := attrs["prefix"]; p != "" && p != "default" && p != "relative" {
					return nil, fmt.Errorf("%s: <include prefix=%q> is not understood", name, p)
				}
				target := text
				if !path.IsAbs(target) {
					base := "/etc/fonts" // fontconfig's configuration directory
					if attrs["prefix"] == "relative" {
						base = path.Dir(name)
					}
					target = path.Join(base, target)
				}
				if s.with, err = f.include(target, attrs["ignore_missing"] == "yes", depth); err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
			}
			cut = append(cut, s)
		case xml.EndElement:
			if level--; level == 0 {
				innerEnd = off
			}
		}
	}
	if innerEnd < 0 {
		return nil, fmt.Errorf("%s: no <fontconfig> element", name)
	}
	var inner []byte
	at := innerStart
	for _, s := range cut {
		inner = append(append(inner, doc[at:s.start]...), s.with...)
		at = s.end
	}
	inner = append(inner, doc[at:innerEnd]...)
	return &flatDoc{prolog: doc[:rootStart], open: doc[rootStart:innerStart], inner: inner, close: doc[innerEnd:]}, nil
}

// include returns the elements of the file target names, or of every
// file of the directory it names that fontconfig would load ([0-9]*.conf,
// in byte order), with their own includes inlined.
func (f *flattener) include(target string, ignoreMissing bool, depth int) ([]byte, error) {
	p, err := resolveIn(f.root, target)
	if err != nil {
		return nil, err
	}
	info, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) && ignoreMissing {
		return []byte("<!-- renderbox: " + target + " does not exist -->"), nil
	}
	if err != nil {
		return nil, err
	}
	names := []string{target}
	if info.IsDir() {
		ents, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		names = names[:0]
		for _, e := range ents {
			n := e.Name()
			if n[0] >= '0' && n[0] <= '9' && len(n) > len(".conf") && strings.HasSuffix(n, ".conf") {
				names = append(names, path.Join(target, n))
			}
		}
		slices.Sort(names)
	}
	var out []byte
	for _, n := range names {
		p, err := resolveIn(f.root, n)
		if err != nil {
			return nil, err
		}
		doc, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		flat, err := f.flatten(doc, n, depth+1)
		if err != nil {
			return nil, err
		}
		f.files = append(f.files, n)
		out = append(append(append(out, "<!-- renderbox: from "+n+" -->"...), flat.inner...), '\n')
	}
	return out, nil
}

// elementText reads the text of the element just started, through its end.
func elementText(d *xml.Decoder) (string, error) {
	var b strings.Builder
	for {
		tok, err := d.Token()
		if err != nil {
			return "", err
		}
		switch t := tok.(type) {
		case xml.CharData:
			b.Write(t)
		case xml.EndElement:
			return strings.TrimSpace(b.String()), nil
		case xml.StartElement:
			return "", fmt.Errorf("unexpected <%s> inside", t.Name.Local)
		}
	}
}

// resolveIn resolves p, an absolute path as a program chrooted to root
// sees it, to a path on the host, following symlinks (absolute ones from
// root) without leaving root.
func resolveIn(root, p string) (string, error) {
	rest := strings.Split(strings.Trim(path.Clean(p), "/"), "/")
	var done []string
	for hops := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
			}
			continue
		}
		host := filepath.Join(root, filepath.FromSlash(path.Join(append(done, c)...)))
		target, err := os.Readlink(host)
		if err != nil { // not a symlink, or not there: taken as it is
			done = append(done, c)
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("%s: too many symlinks", p)
		}
		if path.IsAbs(target) {
			done = nil
		}
		rest = append(strings.Split(strings.Trim(target, "/"), "/"), rest...)
	}
	return filepath.Join(root, filepath.FromSlash(path.Join(done...))), nil
}
