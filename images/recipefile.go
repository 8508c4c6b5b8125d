package images

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// recipeFile is a recipe as its author writes it, in YAML. Every key is
// known: an unknown one is an error naming the line.
type recipeFile struct {
	Name string `yaml:"name"`
	// From is a flavor (minimal, browser) or the path of another recipe
	// file, relative to this one.
	From      string     `yaml:"from"`
	Screen    *screen    `yaml:"screen"`
	DiskMiB   int        `yaml:"disk_mib"`
	MemoryMiB int        `yaml:"memory_mib"`
	CPUs      int        `yaml:"cpus"`
	Packages  []string   `yaml:"packages"`
	Files     []fileSpec `yaml:"files"`
	Build     []string   `yaml:"build"`
	Apps      []App      `yaml:"apps"`
	OnCreate  []string   `yaml:"on_create"`
	fromLine  int
}

type screen struct {
	Width  int `yaml:"width"`
	Height int `yaml:"height"`
}

type fileSpec struct {
	Src   string     `yaml:"src"`
	Dst   string     `yaml:"dst"`
	Mode  *octalMode `yaml:"mode"`
	Owner string     `yaml:"owner"`
	line  int
}

// octalMode is a file mode written in octal, quoted or not ("0644", 0755).
type octalMode uint32

func (m *octalMode) UnmarshalYAML(n *yaml.Node) error {
	v, err := strconv.ParseUint(strings.TrimPrefix(n.Value, "0o"), 8, 32)
	if n.Kind != yaml.ScalarNode || err != nil || v > 0o7777 {
		return fmt.Errorf("line %d: mode %q: write it in octal, like \"0644\"", n.Line, n.Value)
	}
	*m = octalMode(v)
	return nil
}

// App is a program the desktop session starts at boot, in recipe order,
// and waits for until its readiness check passes.
type App struct {
	Name  string     `yaml:"name" json:"name"`
	Run   string     `yaml:"run" json:"run"`
	Ready ReadyCheck `yaml:"ready" json:"ready"`
	// Timeout bounds the wait for the check (default 2 minutes: a heavy
	// app under TCG).
	Timeout appTimeout `yaml:"timeout" json:"timeout_seconds"`
	line    int
}

// ReadyCheck says when an app is ready: exactly one field is set.
type ReadyCheck struct {
	// Window is a POSIX extended regular expression a visible window's
	// title matches, ignoring case (xdotool's search).
	Window string `yaml:"window" json:"window,omitempty"`
	// Port is a TCP port some program in the guest listens on.
	Port int `yaml:"port" json:"port,omitempty"`
	// File is a path that exists.
	File string `yaml:"file" json:"file,omitempty"`
	// Command is a shell command that exits 0.
	Command string `yaml:"command" json:"command,omitempty"`
}

// appTimeout is a whole number of seconds, written as a Go duration
// ("90s", "2m") in the recipe.
type appTimeout int

func (t *appTimeout) UnmarshalYAML(n *yaml.Node) error {
	d, err := time.ParseDuration(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil || d < time.Second || d > time.Hour || d%time.Second != 0 {
		return fmt.Errorf("line %d: timeout %q: write whole seconds from 1s to 1h, like \"90s\" or \"2m\"", n.Line, n.Value)
	}
	*t = appTimeout(d / time.Second)
	return nil
}

const defaultAppTimeout = 120

// Limits on what a recipe asks for.
const (
	maxRecipeBytes = 1 << 20
	maxRecipeDepth = 8
	maxCopyBytes   = 4 << 30
)

var (
	appName     = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
	imageName   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	debianName  = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	ownerSpec   = regexp.MustCompile(`^([a-z_][a-z0-9_-]*|[0-9]+)(:([a-z_][a-z0-9_-]*|[0-9]+))?$`)
	errNoRecipe = errors.New("no such recipe")
)

// RecipeError is a mistake in a recipe file: the file, the line (0 when
// not known) and what was wrong.
type RecipeError struct {
	File string
	Line int
	Msg  string
}

func (e *RecipeError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("recipe %s, line %d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("recipe %s: %s", e.File, e.Msg)
}

// LoadRecipe reads a recipe file and everything it starts from, and
// returns the recipe an image is built from, with its name. Copied files
// are read to hash their content: the recipe's hash covers them.
func LoadRecipe(path string) (Recipe, string, error) {
	layers, err := loadLayers(path, nil)
	if err != nil {
		return Recipe{}, "", err
	}
	return flatten(layers)
}

// layer is one recipe file of a chain, with where it lies.
type layer struct {
	path string
	rf   recipeFile
}

// loadLayers returns the chain of recipe files from the flavor up: the
// file that names the flavor first, path's own last.
func loadLayers(path string, seen []string) ([]layer, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &RecipeError{File: path, Msg: err.Error()}
	}
	if slices.Contains(seen, abs) {
		return nil, &RecipeError{File: path, Msg: fmt.Sprintf("starts from itself (%s)", strings.Join(append(seen, abs), " -> "))}
	}
	if len(seen) >= maxRecipeDepth {
		return nil, &RecipeError{File: path, Msg: fmt.Sprintf("starts from a chain of more than %d recipes", maxRecipeDepth)}
	}
	data, err := readRecipe(abs)
	if err != nil {
		return nil, &RecipeError{File: path, Msg: err.Error()}
	}
	rf, err := decodeRecipe(data)
	if err != nil {
		var re *RecipeError
		if errors.As(err, &re) {
			re.File = path
			return nil, re
		}
		return nil, &RecipeError{File: path, Msg: err.Error()}
	}
	here := layer{path: abs, rf: rf}
	if rf.From == FlavorMinimal || rf.From == FlavorBrowser {
		return []layer{here}, nil
	}
	parent := rf.From
	if !filepath.IsAbs(parent) {
		parent = filepath.Join(filepath.Dir(abs), parent)
	}
	if _, err := os.Stat(parent); errors.Is(err, fs.ErrNotExist) {
		return nil, &RecipeError{File: path, Line: rf.fromLine, Msg: fmt.Sprintf("from %s: %v (not a flavor either: use minimal, browser, or the path of a recipe file relative to this one)", rf.From, errNoRecipe)}
	}
	below, err := loadLayers(parent, append(seen, abs))
	if err != nil {
		return nil, err
	}
	return append(below, here), nil
}

func readRecipe(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoRecipe
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRecipeBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxRecipeBytes {
		return nil, fmt.Errorf("larger than %d bytes: ship big content as files it copies", maxRecipeBytes)
	}
	return data, nil
}

// decodeRecipe decodes one recipe file strictly and checks each field on
// its own; what needs the chain (the flavor, the screen) is checked when
// the chain is flattened.
func decodeRecipe(data []byte) (recipeFile, error) {
	var rf recipeFile
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		re := yamlError(err)
		if line := syntaxLine(data); line > 0 {
			re.Line = line
		}
		return rf, re
	}
	if len(doc.Content) == 0 {
		return rf, &RecipeError{Msg: "empty: it needs at least name and from"}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		return rf, yamlError(err)
	}
	// Lines of list items, for errors found after decoding.
	lines := itemLines(doc.Content[0])
	for i := range rf.Files {
		rf.Files[i].line = at(lines["files"], i)
	}
	for i := range rf.Apps {
		rf.Apps[i].line = at(lines["apps"], i)
	}
	rf.fromLine = at(lines["from"], -1)
	return rf, checkFields(rf, lines)
}

// yamlError turns the YAML library's message ("yaml: unmarshal errors:\n
// line 3: field foo not found in type ...") into a RecipeError.
func yamlError(err error) *RecipeError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	var lines []string
	line := 0
	for _, l := range strings.Split(msg, "\n") {
		l = strings.TrimSpace(l)
		if n, rest, ok := cutLine(l); ok {
			if line == 0 {
				line = n
			}
			l = rest
		}
		l = strings.Replace(l, " in type images.", " in ", 1)
		lines = append(lines, l)
	}
	return &RecipeError{Line: line, Msg: strings.Join(lines, "; ")}
}

// syntaxBudget bounds the bytes syntaxLine parses in all, so that a large
// file with its mistake near the top costs no more than that.
const syntaxBudget = 8 << 20

// syntaxLine finds the line of a YAML syntax error, or 0. The YAML library
// gives the line where the construct around the mistake begins (for most
// mistakes the recipe's top-level mapping: its first line, or the one
// after a leading comment), and counts a parser error's lines from 0, so
// its number can lie lines above the mistake. Whole lines the mistake
// comes after still parse, and no prefix that holds it does: the mistake
// is on the line after the longest prefix of whole lines that parses.
func syntaxLine(data []byte) int {
	// ends[k]: the length of the first k+1 lines; a line ends as YAML
	// counts lines in a recipe's usual breaks (\n, \r\n, or \r).
	var ends []int
	for i, c := range data {
		if c == '\n' || c == '\r' && (i+1 == len(data) || data[i+1] != '\n') {
			ends = append(ends, i+1)
		}
	}
	if n := len(data); n > 0 && (len(ends) == 0 || ends[len(ends)-1] != n) {
		ends = append(ends, n)
	}
	spent := 0
	for k := len(ends) - 1; k > 0; k-- {
		prefix := data[:ends[k-1]]
		if spent += len(prefix); spent > syntaxBudget {
			return 0
		}
		var n yaml.Node
		if yaml.Unmarshal(prefix, &n) == nil {
			return k + 1
		}
	}
	return 1
}

// cutLine splits "line 3: rest" into 3 and "rest".
func cutLine(s string) (int, string, bool) {
	rest, ok := strings.CutPrefix(s, "line ")
	if !ok {
		return 0, s, false
	}
	num, rest, ok := strings.Cut(rest, ": ")
	n, err := strconv.Atoi(num)
	if !ok || err != nil {
		return 0, s, false
	}
	return n, rest, true
}

// itemLines maps each top-level key to its line and the lines of its
// list items (key's own line first).
func itemLines(root *yaml.Node) map[string][]int {
	out := map[string][]int{}
	if root.Kind != yaml.MappingNode {
		return out
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		ls := []int{k.Line}
		for _, item := range v.Content {
			ls = append(ls, item.Line)
		}
		out[k.Value] = ls
	}
	return out
}

// at returns the line of list item i, or of the key when unknown.
func at(lines []int, i int) int {
	if i+1 < len(lines) {
		return lines[i+1]
	}
	if len(lines) > 0 {
		return lines[0]
	}
	return 0
}

func checkFields(rf recipeFile, lines map[string][]int) error {
	bad := func(key string, i int, format string, args ...any) error {
		line := 0
		if ls := lines[key]; len(ls) > 0 {
			line = ls[0]
			if i >= 0 {
				line = at(ls, i)
			}
		}
		return &RecipeError{Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case rf.Name == "":
		return &RecipeError{Msg: "name is missing: give the image a name, like \"office\""}
	case !imageName.MatchString(rf.Name):
		return bad("name", -1, "name %q: use lower-case letters, digits, '.', '_' and '-', up to 63", rf.Name)
	case rf.Name == FlavorMinimal || rf.Name == FlavorBrowser:
		return bad("name", -1, "name %q is a flavor's: give the recipe's image a name of its own", rf.Name)
	case rf.From == "":
		return &RecipeError{Msg: "from is missing: start from a flavor (minimal, browser) or another recipe file"}
	case rf.DiskMiB != 0 && (rf.DiskMiB < 2048 || rf.DiskMiB > 256<<10):
		return bad("disk_mib", -1, "disk_mib %d: use 2048 to 262144 (the root filesystem, at least what is installed)", rf.DiskMiB)
	case rf.MemoryMiB != 0 && (rf.MemoryMiB < 256 || rf.MemoryMiB > 64<<10):
		return bad("memory_mib", -1, "memory_mib %d: use 256 to 65536", rf.MemoryMiB)
	case rf.CPUs < 0 || rf.CPUs > 64:
		return bad("cpus", -1, "cpus %d: use 1 to 64", rf.CPUs)
	}
	if rf.Screen != nil {
		if _, err := NewRecipe(FlavorMinimal, rf.Screen.Width, rf.Screen.Height); err != nil {
			return bad("screen", -1, "%v", err)
		}
	}
	for i, p := range rf.Packages {
		if !debianName.MatchString(p) {
			return bad("packages", i, "package %q is not a Debian package name", p)
		}
	}
	for i, f := range rf.Files {
		switch {
		case f.Src == "":
			return bad("files", i, "a file needs src: a path relative to the recipe")
		case !strings.HasPrefix(f.Dst, "/") || filepath.Clean(f.Dst) != f.Dst || f.Dst == "/":
			return bad("files", i, "dst %q: give an absolute, clean path in the image", f.Dst)
		case underAny(f.Dst, "/proc", "/sys", "/dev", "/run", "/tmp"):
			return bad("files", i, "dst %q: /proc, /sys, /dev, /run and /tmp are not kept in the image", f.Dst)
		case f.Owner != "" && !ownerSpec.MatchString(f.Owner):
			return bad("files", i, "owner %q: write user or user:group (names or numbers)", f.Owner)
		}
	}
	for i, s := range rf.Build {
		if strings.TrimSpace(s) == "" {
			return bad("build", i, "build step %d is empty", i+1)
		}
	}
	for i, s := range rf.OnCreate {
		if strings.TrimSpace(s) == "" {
			return bad("on_create", i, "on_create command %d is empty", i+1)
		}
	}
	names := map[string]bool{}
	for i, a := range rf.Apps {
		if err := checkApp(a); err != nil {
			return bad("apps", i, "%v", err)
		}
		if names[a.Name] {
			return bad("apps", i, "app %q appears twice", a.Name)
		}
		names[a.Name] = true
	}
	return nil
}

func underAny(path string, dirs ...string) bool {
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

func checkApp(a App) error {
	if !appName.MatchString(a.Name) {
		return fmt.Errorf("app name %q: use lower-case letters, digits and '-', up to 32", a.Name)
	}
	if strings.TrimSpace(a.Run) == "" {
		return fmt.Errorf("app %s: run is missing: the command that starts it", a.Name)
	}
	set := 0
	for _, ok := range []bool{a.Ready.Window != "", a.Ready.Port != 0, a.Ready.File != "", a.Ready.Command != ""} {
		if ok {
			set++
		}
	}
	if set != 1 {
		return fmt.Errorf("app %s: ready needs exactly one of window (a title pattern), port, file or command", a.Name)
	}
	if a.Ready.Window != "" {
		// xdotool matches with POSIX extended expressions, ignoring case.
		if _, err := regexp.CompilePOSIX(a.Ready.Window); err != nil {
			return fmt.Errorf("app %s: ready.window %q: %v", a.Name, a.Ready.Window, err)
		}
	}
	if a.Ready.Port < 0 || a.Ready.Port > 65535 {
		return fmt.Errorf("app %s: ready.port %d: use 1 to 65535", a.Name, a.Ready.Port)
	}
	if a.Ready.File != "" && !strings.HasPrefix(a.Ready.File, "/") {
		return fmt.Errorf("app %s: ready.file %q: give an absolute path", a.Name, a.Ready.File)
	}
	return nil
}

// flatten builds the recipe of a chain of recipe files: the flavor's
// recipe at the last screen size given, then each file's packages, files,
// build steps, apps and on_create commands in chain order.
func flatten(layers []layer) (Recipe, string, error) {
	top := layers[len(layers)-1]
	flavor := layers[0].rf.From
	var width, height int
	var bake BakeDefaults
	diskMiB := 0
	for _, l := range layers {
		if l.rf.Screen != nil {
			width, height = l.rf.Screen.Width, l.rf.Screen.Height
		}
		if l.rf.DiskMiB != 0 {
			diskMiB = l.rf.DiskMiB
		}
		if l.rf.MemoryMiB != 0 {
			bake.MemoryMiB = l.rf.MemoryMiB
		}
		if l.rf.CPUs != 0 {
			bake.CPUs = l.rf.CPUs
		}
	}
	r, err := NewRecipe(flavor, width, height)
	if err != nil {
		return Recipe{}, "", &RecipeError{File: layers[0].path, Msg: err.Error()}
	}
	r.DiskMiB = diskMiB
	r.Source = top.path
	r.Name = top.rf.Name
	seenPkg := map[string]bool{}
	for _, p := range append(append([]string(nil), r.Packages...), r.AptPackages...) {
		seenPkg[p] = true
	}
	var apps []App
	for _, l := range layers {
		for _, p := range l.rf.Packages {
			if !seenPkg[p] {
				seenPkg[p] = true
				r.AptPackages = append(r.AptPackages, p)
			}
		}
		for _, f := range l.rf.Files {
			copies, err := expandCopy(filepath.Dir(l.path), f)
			if err != nil {
				return Recipe{}, "", &RecipeError{File: l.path, Line: f.line, Msg: err.Error()}
			}
			r.Copies = append(r.Copies, copies...)
		}
		r.BuildSteps = append(r.BuildSteps, l.rf.Build...)
		for _, a := range l.rf.Apps {
			if slices.ContainsFunc(apps, func(b App) bool { return b.Name == a.Name }) {
				return Recipe{}, "", &RecipeError{File: l.path, Line: a.line, Msg: fmt.Sprintf("app %q is already started by a recipe this one starts from", a.Name)}
			}
			if a.Timeout == 0 {
				a.Timeout = defaultAppTimeout
			}
			apps = append(apps, a)
		}
		bake.OnCreate = append(bake.OnCreate, l.rf.OnCreate...)
	}
	var total int64
	for _, c := range r.Copies {
		total += c.Size
	}
	if total > maxCopyBytes {
		return Recipe{}, "", &RecipeError{File: top.path, Msg: fmt.Sprintf("its files come to %d MiB, more than %d MiB", total>>20, maxCopyBytes>>20)}
	}
	r.Apps = apps
	for i, a := range apps {
		r.Files = append(r.Files, File{Path: appScriptPath(i, a), Mode: 0o755, Content: appScript(a)})
	}
	r.Bake = bake
	return r, top.rf.Name, nil
}

// Copy is one file a recipe copies into the image. Src is where it was
// found (not part of the hash: moving the recipe does not rebuild); Digest
// is its content's SHA-256 (part of the hash: editing it rebuilds).
type Copy struct {
	Src    string `json:"src"`
	Dst    string `json:"dst"`
	Mode   uint32 `json:"mode"`
	Owner  string `json:"owner,omitempty"`
	Digest string `json:"sha256"`
	Size   int64  `json:"size"`
}

// expandCopy turns a files entry into one Copy per regular file: a
// directory is copied whole, its files under dst at their relative paths.
func expandCopy(dir string, f fileSpec) ([]Copy, error) {
	src := f.Src
	if !filepath.IsAbs(src) {
		src = filepath.Join(dir, src)
	}
	st, err := os.Lstat(src)
	if err != nil {
		return nil, fmt.Errorf("file %s: %w", f.Src, errors.Unwrap(err))
	}
	one := func(path, dst string, info fs.FileInfo) (Copy, error) {
		if !info.Mode().IsRegular() {
			return Copy{}, fmt.Errorf("file %s: only regular files and directories are copied (%s is %s)", f.Src, path, info.Mode().Type())
		}
		mode := uint32(info.Mode().Perm())
		if f.Mode != nil {
			mode = uint32(*f.Mode)
		}
		sum, err := fileDigest(path)
		if err != nil {
			return Copy{}, fmt.Errorf("file %s: %w", f.Src, err)
		}
		return Copy{Src: path, Dst: dst, Mode: mode, Owner: f.Owner, Digest: sum, Size: info.Size()}, nil
	}
	if !st.IsDir() {
		c, err := one(src, f.Dst, st)
		return []Copy{c}, err
	}
	var out []Copy
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		c, err := one(path, filepath.Join(f.Dst, rel), info)
		out = append(out, c)
		return err
	})
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("file %s: the directory is empty", f.Src)
	}
	return out, err
}

func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
