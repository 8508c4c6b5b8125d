package images

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeMirror serves a suite's Release file and its Packages.gz on
// 127.0.0.1, as a Debian mirror lays them out, and counts the downloads
// of the index.
type fakeMirror struct {
	srv *httptest.Server

	mu        sync.Mutex
	release   []byte
	packages  []byte
	downloads int
}

// newFakeMirror serves an index of the flavors' packages and extra ones.
func newFakeMirror(t *testing.T, extra ...string) *fakeMirror {
	t.Helper()
	m := &fakeMirror{}
	m.set(t, extra...)
	base := "/debian/dists/bookworm/"
	mux := http.NewServeMux()
	mux.HandleFunc(base+"Release", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		w.Write(m.release)
	})
	mux.HandleFunc(base+"main/binary-"+debArch()+"/Packages.gz", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.downloads++
		w.Write(m.packages)
	})
	m.srv = httptest.NewServer(mux)
	t.Cleanup(m.srv.Close)
	return m
}

func (m *fakeMirror) url() string { return m.srv.URL + "/debian" }

// set makes the index hold the flavors' packages and extra (a "name" or
// "name provides:a,b" entry), and the Release file name its checksum.
func (m *fakeMirror) set(t *testing.T, extra ...string) {
	t.Helper()
	var idx strings.Builder
	for _, p := range append(append(append([]string(nil), basePackages...), browserPackages...), extra...) {
		name, provides, _ := strings.Cut(p, " provides:")
		fmt.Fprintf(&idx, "Package: %s\nVersion: 1.0\nArchitecture: %s\n", name, debArch())
		if provides != "" {
			fmt.Fprintf(&idx, "Provides: %s\n", strings.ReplaceAll(provides, ",", " (= 1), "))
		}
		idx.WriteString("Description: a package\n more about it\n\n")
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(idx.String()))
	zw.Close()
	sum := sha256.Sum256(gz.Bytes())
	release := fmt.Sprintf("Origin: Debian\nCodename: bookworm\nDate: Sat, 11 Jul 2026 10:16:37 UTC\nMD5Sum:\n 0123 %d main/binary-%s/Packages.gz\nSHA256:\n %s %d main/binary-%s/Packages.gz\n %s 10 main/binary-%s/Packages\n",
		gz.Len(), debArch(), hex.EncodeToString(sum[:]), gz.Len(), debArch(), strings.Repeat("ab", 32), debArch())
	m.mu.Lock()
	m.release, m.packages = []byte(release), gz.Bytes()
	m.mu.Unlock()
}

func (m *fakeMirror) downloaded() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.downloads
}

func TestPackageIndexNamesEveryUnknownPackage(t *testing.T) {
	m := newFakeMirror(t, "libreoffice-calc", "libreoffice-writer", "mupdf", "exim4-daemon-light provides:mail-transport-agent,exim4")
	ix, note, err := loadPackageIndex(context.Background(), m.url(), "bookworm", t.TempDir())
	if err != nil || note != "" {
		t.Fatalf("load: %v (note %q)", err, note)
	}
	got := ix.unknown([]string{"mupdf", "libreoffice-calcc", "mail-transport-agent", "zzqx", "mupfd", "xterm"})
	want := []string{`"libreoffice-calcc" (did you mean libreoffice-calc?)`, `"zzqx"`, `"mupfd" (did you mean mupdf?)`}
	if !slices.Equal(got, want) {
		t.Errorf("unknown:\n got %q\nwant %q", got, want)
	}
	if ix.Suite != "bookworm" || ix.Date != "Sat, 11 Jul 2026 10:16:37 UTC" {
		t.Errorf("index of %q, %q", ix.Suite, ix.Date)
	}
}

// TestPackageIndexIsKept checks that the list is downloaded once per
// index the Release file names, again when it names another, and that a
// mirror that does not answer leaves the kept list in use.
func TestPackageIndexIsKept(t *testing.T) {
	cache := t.TempDir()
	m := newFakeMirror(t, "gimp")
	for range 2 {
		if _, _, err := loadPackageIndex(context.Background(), m.url(), "bookworm", cache); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.downloaded(); n != 1 {
		t.Errorf("the unchanged index was downloaded %d times", n)
	}
	m.set(t, "inkscape")
	ix, _, err := loadPackageIndex(context.Background(), m.url(), "bookworm", cache)
	if err != nil {
		t.Fatal(err)
	}
	if n := m.downloaded(); n != 2 || !ix.has("inkscape") || ix.has("gimp") {
		t.Errorf("after the suite changed: %d downloads, inkscape %v, gimp %v", n, ix.has("inkscape"), ix.has("gimp"))
	}
	m.mu.Lock()
	sum := sha256.Sum256(m.release)
	m.mu.Unlock()
	if want := hex.EncodeToString(sum[:]); ix.Release != want {
		t.Errorf("the Release file's SHA-256 is given as %q, want %q", ix.Release, want)
	}
	// The list is kept: the Release file's checksum is still this one's.
	if again, _, err := loadPackageIndex(context.Background(), m.url(), "bookworm", cache); err != nil || again.Release != ix.Release {
		t.Errorf("with the list kept: Release %q (%v), want %q", again.Release, err, ix.Release)
	}
	if kept, _ := filepath.Glob(filepath.Join(packageListsDir(cache), "bookworm_*")); len(kept) != 1 {
		t.Errorf("lists kept: %v, want the current one", kept)
	}
	m.srv.Close()
	ix, note, err := loadPackageIndex(context.Background(), m.url(), "bookworm", cache)
	if err != nil || !ix.has("inkscape") || !strings.Contains(note, "kept from an earlier build") || ix.Release != "" {
		t.Errorf("offline: %v, note %q, Release %q (not read, so none)", err, note, ix.Release)
	}
	if _, _, err := loadPackageIndex(context.Background(), m.url(), "bookworm", t.TempDir()); err == nil {
		t.Error("offline with no list kept: no error")
	}
}

func TestPackageIndexRefusesAnIndexItsReleaseDoesNotName(t *testing.T) {
	m := newFakeMirror(t)
	m.mu.Lock()
	sum := sha256.Sum256(m.packages)
	m.release = bytes.Replace(m.release, []byte(hex.EncodeToString(sum[:])), []byte(strings.Repeat("cd", 32)), 1)
	m.mu.Unlock()
	_, _, err := loadPackageIndex(context.Background(), m.url(), "bookworm", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "is not the one its Release file names") {
		t.Fatalf("an index its Release file does not name: %v", err)
	}
}

// TestBuildChecksPackageNamesFirst checks that a recipe's unknown package
// fails the build at once, naming each, before anything is built.
func TestBuildChecksPackageNamesFirst(t *testing.T) {
	m := newFakeMirror(t, "libreoffice-calc")
	r, err := NewRecipe(FlavorMinimal, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.Name, r.Source = "office", "office.yaml"
	r.AptPackages = append(r.AptPackages, "libreoffice-calcc", "no-such-thing")
	cache := t.TempDir()
	var progress bytes.Buffer
	_, err = Build(context.Background(), r, BuildOptions{CacheDir: cache, Mirror: m.url(), Progress: &progress})
	if err == nil {
		t.Fatal("the build went on")
	}
	for _, want := range []string{"office.yaml", `"libreoffice-calcc" (did you mean libreoffice-calc?)`, `"no-such-thing"`, "Debian bookworm"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if tmp, _ := filepath.Glob(filepath.Join(imagesDir(cache), ".tmp-*")); len(tmp) > 0 || strings.Contains(progress.String(), "debootstrap") {
		t.Errorf("the build started: %v\n%s", tmp, progress.String())
	}
}

// TestDefaultMirrorIsDebootstraps reads the default mirror out of the
// installed debootstrap.
func TestDefaultMirrorIsDebootstraps(t *testing.T) {
	if _, err := os.Stat("/usr/sbin/debootstrap"); err != nil {
		t.Skip("debootstrap is not installed")
	}
	m, err := defaultMirror()
	if err != nil || !strings.HasPrefix(m, "http") {
		t.Errorf("default mirror %q, %v", m, err)
	}
}

func FuzzParseRelease(f *testing.F) {
	f.Add([]byte("Date: Sat, 11 Jul 2026 10:16:37 UTC\nSHA256:\n " + strings.Repeat("0", 64) + " 12 main/binary-amd64/Packages.gz\n"))
	f.Add([]byte("SHA256:\n x 1 y\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rel, err := parseRelease(bytes.NewReader(data))
		if err != nil {
			return
		}
		for name, f := range rel.files {
			if len(f.sha256) != 64 || f.size < 0 || name == "" {
				t.Fatalf("file %q: %+v", name, f)
			}
		}
	})
}

// FuzzParsePackages checks that what an index parses to is kept and read
// back unchanged.
func FuzzParsePackages(f *testing.F) {
	f.Add([]byte("Package: a\nProvides: b (= 1), c:any\n\nPackage: d\n"))
	f.Add([]byte("Package: a b\nProvides: ,,\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ix, err := parsePackages(bytes.NewReader(data))
		if err != nil {
			return
		}
		path := filepath.Join(t.TempDir(), "list")
		if err := writeList(path, ix); err != nil {
			t.Fatal(err)
		}
		back, err := readList(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(back.names) != len(ix.names) || len(back.provided) != len(ix.provided) {
			t.Fatalf("kept %d names and %d provided, read back %d and %d", len(ix.names), len(ix.provided), len(back.names), len(back.provided))
		}
		for n, p := range ix.provided {
			if !slices.Equal(back.provided[n], p) {
				t.Fatalf("%q provided by %v, read back %v", n, p, back.provided[n])
			}
		}
	})
}
