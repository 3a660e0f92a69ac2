package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/renderbox/renderbox/internal/rootfs"
	"github.com/renderbox/renderbox/internal/worker"
)

// rootfsHelp is each rootfs command's usage line and what it does.
var rootfsHelp = map[string][2]string{
	"seal":       {"seal [-packages F] [-inputs HEX] [-packages-at T] DIR", "Write the tree's manifest: every file's digest, the packages and when they were fetched."},
	"image":      {"image DIR", "Make the tree's EROFS image, which the Sentry mounts as the root instead of asking the gofer for each file."},
	"fontconfig": {"fontconfig DIR", "Flatten the tree's fontconfig configuration: fontconfig answers as before, reading fewer files (rootfs/build.sh runs it)."},
	"verify":     {"verify DIR", "Check the tree against its manifest."},
	"export":     {"export [-o OUTDIR] [DIR]", "Pack a built tree (default $RENDERBOX_ROOTFS, else " + worker.DefaultRootfs + ") into one archive and its .sha256, for hosts that build none."},
	"import":     {"import [-sha256 HEX] [-dir DIR] ARCHIVE", "Install an exported archive, with its image, and switch DIR's current to it."},
}

func cmdRootfs(args []string, stdout io.Writer) error {
	if len(args) < 1 {
		return errors.New("rootfs: usage: worker rootfs seal|image|verify|export|import [flags] ARG")
	}
	sub := args[0]
	help, ok := rootfsHelp[sub]
	if !ok {
		return fmt.Errorf("rootfs: unknown subcommand %q (seal, fontconfig, image, verify, export or import)", sub)
	}
	fs := flags("rootfs "+sub, "usage: worker rootfs "+help[0]+"\n\n"+help[1]+"\n", nil)
	var pkgs, inputs, packagesAt, outDir, sum, dir string
	switch sub {
	case "seal":
		fs.StringVar(&pkgs, "packages", "", "dpkg-query output (name<TAB>version per line)")
		fs.StringVar(&inputs, "inputs", "", "digest of the build inputs")
		fs.StringVar(&packagesAt, "packages-at", "", "when the packages were fetched (RFC 3339; default now)")
	case "export":
		fs.StringVar(&outDir, "o", ".", "the directory the archive and its .sha256 are written to")
	case "import":
		fs.StringVar(&sum, "sha256", "", "the archive's SHA-256 as export printed it (default: read from FILE.sha256)")
		fs.StringVar(&dir, "dir", envOr("RENDERBOX_ROOTFS_DIR", "/var/lib/renderbox/rootfs"), "the rootfs directory, where current is switched (env RENDERBOX_ROOTFS_DIR)")
	}
	rest, err := parse(fs, args[1:], 1)
	var usage usageError
	if errors.As(err, &usage) {
		return errors.New(string(usage)) // as before: exit 1, without the worker's usage
	} else if err != nil {
		return err
	}
	if sub == "export" && len(rest) == 0 {
		rest = []string{envOr("RENDERBOX_ROOTFS", worker.DefaultRootfs)}
	}
	if len(rest) != 1 {
		return fmt.Errorf("rootfs %s: give exactly one tree directory (or archive, to import)", sub)
	}
	tree := rest[0]
	switch sub {
	case "seal":
		return rootfsSeal(stdout, tree, pkgs, inputs, packagesAt)
	case "image":
		t := time.Now()
		m, err := rootfs.Verify(tree)
		if err != nil {
			return err
		}
		rec, err := rootfs.MakeImage(tree, m)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "made %s: %d MiB in %.1fs, sha256 %s, its contents checked: tree %s\n", filepath.Join(tree, rootfs.ImageName), rec.Bytes>>20, time.Since(t).Seconds(), rec.SHA256, rec.TreeSHA256)
	case "fontconfig":
		if err := rootfs.FlattenFontconfig(tree); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "flattened the fontconfig configuration of %s; fontconfig answers as before (%s)\n", tree, rootfs.FontconfigRecordPath)
	case "verify":
		m, err := rootfs.Verify(tree)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s matches its manifest: tree %s\n", tree, m.TreeSHA256)
	case "export":
		return rootfsExport(stdout, tree, outDir)
	case "import":
		return rootfsImport(stdout, tree, sum, dir)
	}
	return nil
}

// rootfsSeal writes tree's manifest (rootfs.Seal) from the packages file
// and when they were fetched.
func rootfsSeal(stdout io.Writer, tree, pkgs, inputs, packagesAt string) error {
	packages := map[string]string{}
	if pkgs != "" {
		f, err := os.Open(pkgs)
		if err != nil {
			return err
		}
		defer f.Close()
		if packages, err = rootfs.ParsePackages(f); err != nil {
			return err
		}
	}
	at := time.Now()
	if packagesAt != "" {
		var err error
		if at, err = time.Parse(time.RFC3339, packagesAt); err != nil {
			return fmt.Errorf("rootfs seal: -packages-at: %w", err)
		}
	}
	m, err := rootfs.Seal(tree, inputs, packages, at)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "sealed %s: %d files, %d MiB, tree %s\n", tree, m.Files, m.Bytes>>20, m.TreeSHA256)
	return nil
}

// rootfsExport packs tree into an archive in outDir (rootfs.Export).
func rootfsExport(stdout io.Writer, tree, outDir string) error {
	t := time.Now()
	ex, err := rootfs.Export(tree, outDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "exported %s: %d files, %d MiB in %d MiB, %.1fs\n", tree, ex.Manifest.Files, ex.Manifest.Bytes>>20, ex.Size>>20, time.Since(t).Seconds())
	fmt.Fprintf(stdout, "tree    %s\narchive %s\nsha256  %s\n", ex.Manifest.TreeSHA256, ex.Path, ex.SHA256)
	return nil
}

// rootfsImport installs archive under dir, with its image, and switches
// its current to it (rootfs.Import), checking the archive against sum or
// its .sha256.
func rootfsImport(stdout io.Writer, archive, sum, dir string) error {
	if sum == "" {
		var err error
		if sum, err = rootfs.ReadSHA256File(archive + ".sha256"); err != nil {
			return fmt.Errorf("rootfs import: %w (copy the .sha256 export wrote beside the archive, or give -sha256)", err)
		}
	}
	t := time.Now()
	im, err := rootfs.Import(archive, strings.ToLower(sum), dir)
	if err != nil {
		return err
	}
	how := "extracted and verified"
	if im.Reused {
		how = "already installed, verified"
	}
	fmt.Fprintf(stdout, "imported %s: %s in %.1fs\ntree    %s\ncurrent %s (was %q); restart the worker to run it\n",
		archive, how, time.Since(t).Seconds(), im.Manifest.TreeSHA256, im.Tree, im.Previous)
	if im.Image == nil {
		fmt.Fprintf(stdout, "no rootfs image: %v, then: worker rootfs image %s; until then sandboxes mount the tree through the gofer\n", rootfs.ErrNoMkfs, im.Tree)
		return nil
	}
	fmt.Fprintf(stdout, "image   %s (%d MiB), its contents checked against the tree's manifest\n", filepath.Join(im.Tree, rootfs.ImageName), im.Image.Bytes>>20)
	return nil
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}
