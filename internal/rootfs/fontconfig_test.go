package rootfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A tree laid out as Debian's: fonts.conf includes conf.d, whose entries
// are absolute symlinks into conf.avail (resolved inside the tree, not on
// the host), one of which includes a missing local.conf and the per-user
// files; a README and a file not of the [0-9]*.conf form that fontconfig
// skips. Flattened, the includes are the files' elements in byte order,
// the per-user elements are gone, and the rest is kept byte for byte.
func TestFlattenFontconfig(t *testing.T) {
	root := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, p string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	const head = "<?xml version=\"1.0\"?>\n<!DOCTYPE fontconfig SYSTEM \"urn:fontconfig:fonts.dtd\">\n"
	write("etc/fonts/fonts.conf", head+`<fontconfig>
	<dir>/usr/share/fonts</dir>
	<dir prefix="xdg">fonts</dir>
	<dir>~/.fonts</dir>
	<match target="pattern"><test name="family"><string>a &amp; b</string></test></match>
	<include ignore_missing="yes">conf.d</include>
	<cachedir>/var/cache/fontconfig</cachedir>
	<cachedir prefix="xdg">fontconfig</cachedir>
</fontconfig>
`)
	write("usr/share/fontconfig/conf.avail/10-first.conf", head+"<fontconfig>\n  <!-- first -->\n  <alias><family>one</family></alias>\n</fontconfig>\n")
	write("usr/share/fontconfig/conf.avail/50-user.conf", head+`<fontconfig>
	<include ignore_missing="yes" prefix="xdg">fontconfig/conf.d</include>
	<include ignore_missing="yes" deprecated="yes">~/.fonts.conf</include>
</fontconfig>
`)
	write("etc/fonts/conf.avail/51-local.conf", head+"<fontconfig>\n\t<include ignore_missing=\"yes\">local.conf</include>\n</fontconfig>\n")
	write("etc/fonts/conf.avail/9-late.conf", head+"<fontconfig><its:rules xmlns:its=\"http://www.w3.org/2005/11/its\" version=\"1.0\"/><alias><family>nine</family></alias></fontconfig>\n")
	write("etc/fonts/conf.d/README", "not configuration")
	write("etc/fonts/conf.d/x-skipped.conf", head+"<fontconfig><alias><family>skipped</family></alias></fontconfig>\n")
	link("/usr/share/fontconfig/conf.avail/10-first.conf", "etc/fonts/conf.d/10-first.conf")
	link("/usr/share/fontconfig/conf.avail/50-user.conf", "etc/fonts/conf.d/50-user.conf")
	link("../conf.avail/51-local.conf", "etc/fonts/conf.d/51-local.conf")
	link("/etc/fonts/conf.avail/9-late.conf", "etc/fonts/conf.d/9-late.conf")
	// An absolute symlink must not reach the host's /etc.
	link("/etc/passwd", "etc/fonts/conf.d/60-host.conf")

	doc, err := os.ReadFile(filepath.Join(root, "etc/fonts/fonts.conf"))
	if err != nil {
		t.Fatal(err)
	}
	f := &flattener{root: root}
	if _, err := f.flatten(doc, "/etc/fonts/fonts.conf", 0); err == nil || !strings.Contains(err.Error(), "60-host.conf") {
		t.Fatalf("a conf.d symlink to /etc/passwd, absent from the tree: %v; want an error naming it", err)
	}
	if err := os.Remove(filepath.Join(root, "etc/fonts/conf.d/60-host.conf")); err != nil {
		t.Fatal(err)
	}
	f = &flattener{root: root}
	flat, err := f.flatten(doc, "/etc/fonts/fonts.conf", 0)
	if err != nil {
		t.Fatal(err)
	}
	got := string(flat.prolog) + string(flat.open) + string(flat.inner) + string(flat.close)
	for _, want := range []string{
		head + "<fontconfig>\n\t<dir>/usr/share/fonts</dir>\n",
		"<string>a &amp; b</string>",
		"<!-- renderbox: from /etc/fonts/conf.d/10-first.conf -->\n  <!-- first -->\n  <alias><family>one</family></alias>\n",
		"<!-- renderbox: /etc/fonts/local.conf does not exist -->",
		`<its:rules xmlns:its="http://www.w3.org/2005/11/its" version="1.0"/><alias><family>nine</family></alias>`,
		"<cachedir>/var/cache/fontconfig</cachedir>",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("flattened fonts.conf lacks %q:\n%s", want, got)
		}
	}
	for _, gone := range []string{"<include ", "prefix=\"xdg\"", ">~/", "skipped", "not configuration"} {
		if strings.Contains(got, gone) {
			t.Errorf("flattened fonts.conf still has %q:\n%s", gone, got)
		}
	}
	// conf.d's order is the names' bytes: 10-, 50-, 51-, 9-.
	order := []string{"10-first", "50-user", "51-local", "9-late"}
	last := -1
	for _, n := range order {
		i := strings.Index(got, "from /etc/fonts/conf.d/"+n)
		if i < last {
			t.Errorf("%s is inlined out of order (want %v):\n%s", n, order, got)
		}
		last = i
	}
	if strings.Join(f.files, " ") != "/etc/fonts/conf.d/10-first.conf /etc/fonts/conf.d/50-user.conf /etc/fonts/conf.d/51-local.conf /etc/fonts/conf.d/9-late.conf" {
		t.Errorf("inlined files %v", f.files)
	}

	// What fontconfig would not understand stops the build.
	for name, bad := range map[string]string{
		"missing":    `<fontconfig><include>nowhere.conf</include></fontconfig>`,
		"cwd prefix": `<fontconfig><include prefix="cwd">x.conf</include></fontconfig>`,
		"not xml":    `<fontconfig><include>conf.d</fontconfig>`,
		"other root": `<config/>`,
	} {
		if _, err := (&flattener{root: root}).flatten([]byte(bad), "/etc/fonts/fonts.conf", 0); err == nil {
			t.Errorf("%s: flattened without an error", name)
		}
	}
}

func TestResolveIn(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a/b", "c"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for target, p := range map[string]string{"/c": "a/abs", "../c": "a/b/rel", "/../../c": "a/up", "loop": "loop"} {
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	for p, want := range map[string]string{"/a/abs/f": "c/f", "/a/b/rel/f": "a/c/f", "/a/up": "c", "/../../a/b": "a/b", "/nothing/x": "nothing/x"} {
		got, err := resolveIn(root, p)
		if err != nil || got != filepath.Join(root, want) {
			t.Errorf("resolveIn(%s) = %s, %v; want %s", p, got, err, filepath.Join(root, want))
		}
	}
	if _, err := resolveIn(root, "/loop/x"); err == nil {
		t.Error("a symlink loop resolved")
	}
}
