package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestArchitecture_namesExist reads ARCHITECTURE.md's table of where each
// invariant is enforced and fails when a name it gives (pkg.Name or
// pkg.Type.Member, a test function included) is not in the code: the
// document cannot drift from the code unnoticed.
func TestArchitecture_namesExist(t *testing.T) {
	doc, err := os.ReadFile("ARCHITECTURE.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(doc), "## Where each invariant is enforced")
	require.True(t, ok, "the table's heading")
	table, _, _ = strings.Cut(table, "\n## ")
	pkgs := packages(t, "..")
	name := regexp.MustCompile("`([a-z][a-z0-9]*(?:\\.[A-Za-z_][A-Za-z0-9_]*){1,2})`")
	checked := 0
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || strings.HasPrefix(strings.TrimSpace(cells[2]), "---") || strings.TrimSpace(cells[2]) == "Enforced in" {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cells[2], -1) {
			parts := strings.Split(m[1], ".")
			names, ok := pkgs[parts[0]]
			if !assert.True(t, ok, "%s: no package %s", m[1], parts[0]) {
				continue
			}
			assert.True(t, names[strings.Join(parts[1:], ".")], "%s is not in package %s", m[1], parts[0])
			checked++
		}
	}
	assert.Greater(t, checked, 20, "the table's names were found")
}

// packages maps each package name under root to the names it declares:
// functions, types, variables and constants, and Type.Member for methods,
// struct fields and interface methods. Test files count (a table may name
// the test that pins a rule).
func packages(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "build") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := strings.TrimSuffix(f.Name.Name, "_test")
		names := out[pkg]
		if names == nil {
			names = map[string]bool{}
			out[pkg] = names
		}
		for _, decl := range f.Decls {
			declared(decl, names)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// declared adds what decl declares to names.
func declared(decl ast.Decl, names map[string]bool) {
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil || len(d.Recv.List) == 0 {
			names[d.Name.Name] = true
			return
		}
		typ := d.Recv.List[0].Type
		if s, ok := typ.(*ast.StarExpr); ok {
			typ = s.X
		}
		if ix, ok := typ.(*ast.IndexExpr); ok {
			typ = ix.X
		}
		if id, ok := typ.(*ast.Ident); ok {
			names[id.Name+"."+d.Name.Name] = true
		}
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.ValueSpec:
				for _, n := range s.Names {
					names[n.Name] = true
				}
			case *ast.TypeSpec:
				names[s.Name.Name] = true
				var fields *ast.FieldList
				switch tt := s.Type.(type) {
				case *ast.StructType:
					fields = tt.Fields
				case *ast.InterfaceType:
					fields = tt.Methods
				}
				if fields == nil {
					continue
				}
				for _, fl := range fields.List {
					for _, n := range fl.Names {
						names[s.Name.Name+"."+n.Name] = true
					}
				}
			}
		}
	}
}
