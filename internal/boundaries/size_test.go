package boundaries

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The sizes a newcomer reads first, held where they are so they only
// shrink (docs/ARCHITECTURE.md): lower a limit when a change brings its
// figure down.
const (
	maxManagerMethods = 19  // exported methods of desktop.Manager
	maxDesktopFile    = 400 // lines of the largest non-test file of desktop
	maxAppLines       = 362 // non-test lines of hostd/app: wiring only
	maxReadmeLines    = 189
)

func TestSizesOnlyShrink(t *testing.T) {
	root := filepath.Join("..", "..")
	if n := managerMethods(t, filepath.Join(root, "desktop")); n > maxManagerMethods {
		t.Errorf("desktop.Manager has %d exported methods, at most %d: give a concern a type of its own", n, maxManagerMethods)
	}
	if name, n := largestFile(t, filepath.Join(root, "desktop")); n > maxDesktopFile {
		t.Errorf("desktop/%s has %d lines, at most %d", name, n, maxDesktopFile)
	}
	if n := nonTestLines(t, filepath.Join(root, "hostd", "app")); n > maxAppLines {
		t.Errorf("hostd/app has %d non-test lines, at most %d: behaviour belongs in its own package", n, maxAppLines)
	}
	if n := lines(t, filepath.Join(root, "README.md")); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, at most %d: move detail to docs/", n, maxReadmeLines)
	}
}

// managerMethods counts the exported methods on *Manager in dir's
// non-test files.
func managerMethods(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	for _, path := range goFiles(t, dir) {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || !fn.Name.IsExported() {
				continue
			}
			if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok {
				if id, ok := star.X.(*ast.Ident); ok && id.Name == "Manager" {
					n++
				}
			}
		}
	}
	return n
}

func largestFile(t *testing.T, dir string) (string, int) {
	t.Helper()
	name, most := "", 0
	for _, path := range goFiles(t, dir) {
		if n := lines(t, path); n > most {
			name, most = filepath.Base(path), n
		}
	}
	return name, most
}

func nonTestLines(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	for _, path := range goFiles(t, dir) {
		n += lines(t, path)
	}
	return n
}

// goFiles lists dir's non-test Go files.
func goFiles(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range paths {
		if !strings.HasSuffix(p, "_test.go") {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return out
}

func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}
