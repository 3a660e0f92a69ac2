package sandbox

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// poolFile reports whether name is one of the pool's files (doc.go).
func poolFile(name string) bool {
	return name == "gate.go" || strings.HasPrefix(name, "pool") && !strings.HasSuffix(name, "_test.go")
}

// TestPoolSeams keeps the pool on the exported, documented surface of
// Manager and Sandbox (doc.go): no selector in the pool's files may reach
// an unexported field or method of either, or an undocumented one. The package is type-checked
// from source alone, its imports left unresolved, which still types every
// expression built from its own types.
func TestPoolSeams(t *testing.T) {
	uses, seen := privateUses(t, ".")
	if seen < 10 {
		t.Fatalf("the pool's files use %d members of Manager and Sandbox; the check is not seeing them", seen)
	}
	for _, u := range uses {
		t.Errorf("%s; give the pool an exported, documented one", u)
	}
}

// privateUses type-checks the package in dir and returns where the pool's
// files select an unexported member of Manager or Sandbox, and how many
// members of the two they select in all.
func privateUses(t *testing.T, dir string) (uses []string, seen int) {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	pool := map[*ast.File]bool{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		pool[f] = poolFile(filepath.Base(name))
	}
	info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{
		Importer: unresolved{},
		Error:    func(error) {}, // the imports' types are unknown here
	}
	_, _ = conf.Check("sandbox", fset, files, info)
	documented := docs(files)
	for _, f := range files {
		if !pool[f] {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			se, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			sel := info.Selections[se]
			if sel == nil || !ownedByCore(sel) {
				return true
			}
			seen++
			switch at := fset.Position(se.Sel.Pos()); {
			case !sel.Obj().Exported():
				uses = append(uses, fmt.Sprintf("%s: .%s is private to Manager or Sandbox", at, se.Sel.Name))
			case !documented[sel.Obj().Pos()]:
				uses = append(uses, fmt.Sprintf("%s: .%s has no doc comment", at, se.Sel.Name))
			}
			return true
		})
	}
	sort.Strings(uses)
	return uses, seen
}

// docs returns the positions of the names of the methods and struct
// fields in files that have a doc comment.
func docs(files []*ast.File) map[token.Pos]bool {
	has := map[token.Pos]bool{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch d := n.(type) {
			case *ast.FuncDecl:
				has[d.Name.Pos()] = d.Doc != nil
			case *ast.Field:
				for _, name := range d.Names {
					has[name.Pos()] = d.Doc != nil || d.Comment != nil
				}
			}
			return true
		})
	}
	return has
}

// ownedByCore reports whether sel is a field or method of Manager or
// Sandbox.
func ownedByCore(sel *types.Selection) bool {
	var owner types.Type
	switch obj := sel.Obj().(type) {
	case *types.Func:
		sig, _ := obj.Type().(*types.Signature)
		if sig == nil || sig.Recv() == nil {
			return false
		}
		owner = sig.Recv().Type()
	case *types.Var:
		owner = sel.Recv()
	default:
		return false
	}
	if p, ok := owner.(*types.Pointer); ok {
		owner = p.Elem()
	}
	named, ok := owner.(*types.Named)
	if !ok {
		return false
	}
	name := named.Obj().Name()
	return named.Obj().Pkg() != nil && named.Obj().Pkg().Path() == "sandbox" && (name == "Manager" || name == "Sandbox")
}

// unresolved imports every package as an empty one: the seams are between
// the package's own types.
type unresolved struct{}

func (unresolved) Import(path string) (*types.Package, error) {
	if path == "unsafe" {
		return importer.Default().Import(path)
	}
	name := path[strings.LastIndex(path, "/")+1:]
	pkg := types.NewPackage(path, name)
	pkg.MarkComplete()
	return pkg, nil
}
