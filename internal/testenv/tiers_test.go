package testenv_test

import (
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTiers keeps the two test tiers honest (docs/testing.md). `make test`
// builds without the "unit" tag, so every test file must build there; a
// file that says "//go:build !unit" leaves `make unit`, and every test in
// it must need the machine: reach, directly or through the package's own
// helpers, a part of testenv that is itself built without "unit" only. A
// pure test in such a file would silently shrink the unit tier: move it
// (or the helper it shares) to a file without the tag.
func TestTiers(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	machine := map[string]map[string]bool{
		"testenv": testenvMachine(t, filepath.Join(root, "internal", "testenv")),
		"tool":    testenvMachine(t, filepath.Join(root, "internal", "testenv", "tool")),
	}
	if len(machine["testenv"]) < 10 {
		t.Fatalf("found %d parts of testenv built without the unit tag (%v); want the runsc, rootfs, Redis and PostgreSQL ones", len(machine["testenv"]), machine["testenv"])
	}
	if !machine["tool"]["Need"] {
		t.Fatalf("testenv/tool.Need is not built without the unit tag only (%v)", machine["tool"])
	}
	dirs := map[string][]*ast.File{} // a directory's test files that leave the unit tier
	names := map[*ast.File]string{}
	fset := token.NewFileSet()
	excluded := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		expr := buildConstraint(f)
		if expr == nil {
			return nil
		}
		if !expr.Eval(func(tag string) bool { return false }) {
			t.Errorf("%s: %q does not build in make test (no tags): its tests would never run", rel, expr)
		}
		if !expr.Eval(func(tag string) bool { return tag == "unit" }) {
			dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], f)
			names[f] = rel
			excluded++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if excluded == 0 {
		t.Fatal("no test file says //go:build !unit: is the tree where this test thinks it is?")
	}
	unseen := maps.Clone(notSplit)
	for _, files := range dirs {
		needs := packageMachine(files, machine)
		for _, f := range files {
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Recv != nil || fn.Name.Name == "TestMain" || !isTest(fn.Name.Name) {
					continue
				}
				key := filepath.ToSlash(filepath.Dir(names[f])) + " " + fn.Name.Name
				if notSplit[key] {
					delete(unseen, key)
					continue
				}
				if !needs[fn.Name.Name] {
					t.Errorf("%s: %s needs nothing from the machine (no runsc, rootfs, Redis or PostgreSQL through testenv) but its file says //go:build !unit, so make unit skips it; move it to a file without the tag",
						names[f], fn.Name.Name)
				}
			}
		}
	}
	for key := range unseen {
		t.Errorf("notSplit names %s, which is no longer a test in a //go:build !unit file: remove its line", key)
	}
}

// notSplit are tests that need nothing from the machine yet share a file
// with tests that do, in packages whose tests are being moved; each is to
// go to a file of its own without the tag, and its line here with it.
var notSplit = map[string]bool{
	"internal/render TestChainIsCheckedBeforeAnySandbox":                     true,
	"internal/render TestSiteArchivesAreCheckedBeforeAnySandbox":             true,
	"internal/render TestAcceptOutputsRefusesWhatTheRendererDoesNotMake":     true,
	"internal/render TestAcceptOutputsPublishesNamesAndTypesFromTheRenderer": true,
	"internal/render TestCheckOutputName":                                    true,
	"internal/render TestNameOutputs":                                        true,
	"internal/render TestEveryRendererHasAnOutputRule":                       true,
	"internal/render TestPDFMergeRefusesWhatIsNotAPDF":                       true,
	"internal/render TestPDFSplitPartsArePublishedInPageOrder":               true,
	"internal/render TestPDFMetadataWritesPDFDates":                          true,
	"internal/render TestPDFStampOptions":                                    true,
	"internal/render TestPrimedFamilies":                                     true,
	"internal/render TestSniff":                                              true,
	"internal/render TestEveryRendererRefusesBadRequestsBeforeAnySandbox":    true,
	"internal/render TestLimitsCanBeLoweredNeverRaised":                      true,
	"internal/render TestHugeImagesAreRefusedFromTheirHeader":                true,
	"internal/render TestPrepareJSON":                                        true,
	"internal/render TestOfficeRequestNamesOnlyTheDocument":                  true,
	"internal/render TestDeclaredInputType":                                  true,
	"internal/render TestOptionErrorsSayWhatWasSent":                         true,
	"internal/render TestSafePDFRefusesMalformedFrames":                      true,
	"internal/render TestSafePDFFramesSpillToAnUnlinkedFile":                 true,
	"internal/render TestSafePDFConvertStageLimits":                          true,
	"internal/apiserver TestResolveDB":                                       true,
	"internal/apiserver TestWebhookSecretFileNeededWithPostgres":             true,
	"internal/apiserver TestDeployReplicaSettings":                           true,
	"internal/apiserver TestPublicURLIsValidated":                            true,
	"internal/apiserver TestUnknownCommandsOpenNothing":                      true,
	"internal/apiserver TestVersionFlag":                                     true,
	"internal/apiserver TestKeysRefuseAMissingLedger":                        true,
	"internal/apiserver TestTrustedProxiesChecked":                           true,
	"cmd/worker TestRootfsExportImportCommands":                              true,
	"cmd/worker TestCommandLine":                                             true,
}

// testenvMachine returns the exported names that testenv declares in files
// built without the "unit" tag only.
func testenvMachine(t *testing.T, dir string) map[string]bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	names := map[string]bool{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if expr := buildConstraint(f); expr == nil || expr.Eval(func(tag string) bool { return tag == "unit" }) {
			continue
		}
		for name := range topLevel(f) {
			if ast.IsExported(name) {
				names[name] = true
			}
		}
	}
	return names
}

// packageMachine returns the top-level names of files that need the
// machine: those that use a part of testenv in machine, or another such
// name of the same directory, until nothing changes.
func packageMachine(files []*ast.File, machine map[string]map[string]bool) map[string]bool {
	decls := map[string][]ast.Node{}
	for _, f := range files {
		for name, nodes := range topLevel(f) {
			decls[name] = append(decls[name], nodes...)
		}
	}
	needs := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for name, nodes := range decls {
			if needs[name] {
				continue
			}
			for _, n := range nodes {
				if uses(n, machine, needs) {
					needs[name], changed = true, true
					break
				}
			}
		}
	}
	return needs
}

// topLevel maps each top-level name of f to its declarations; a method
// counts as its receiver type's, so that a test using the type uses it.
func topLevel(f *ast.File) map[string][]ast.Node {
	m := map[string][]ast.Node{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			name := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) == 1 {
				name = receiverType(d.Recv.List[0].Type)
			}
			m[name] = append(m[name], d)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					m[s.Name.Name] = append(m[s.Name.Name], s)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						m[n.Name] = append(m[n.Name], s)
					}
				}
			}
		}
	}
	return m
}

func receiverType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverType(e.X)
	case *ast.IndexExpr:
		return receiverType(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// uses reports whether n names pkg.X for X in machine[pkg] (testenv's
// machine parts, tool.Need), or a bare identifier in needs.
func uses(n ast.Node, machine map[string]map[string]bool, needs map[string]bool) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && machine[id.Name][n.Sel.Name] {
				found = true
			}
		case *ast.Ident:
			if needs[n.Name] {
				found = true
			}
		}
		return !found
	})
	return found
}

func isTest(name string) bool {
	for _, p := range []string{"Test", "Fuzz", "Benchmark", "Example"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// buildConstraint is f's //go:build expression, or nil.
func buildConstraint(f *ast.File) constraint.Expr {
	for _, g := range f.Comments {
		if g.Pos() > f.Package {
			break
		}
		for _, c := range g.List {
			if constraint.IsGoBuild(c.Text) {
				expr, err := constraint.Parse(c.Text)
				if err == nil {
					return expr
				}
			}
		}
	}
	return nil
}
