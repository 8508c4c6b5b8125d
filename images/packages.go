package images

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/internal/textdist"
)

// A recipe's package names are checked against the mirror's package list
// before the build starts: apt would say a name is unknown only after
// debootstrap, minutes into the build.

// packageIndex is what a suite's Packages index says exists: the names of
// its packages, and the names they provide (virtual packages) with the
// packages providing each.
type packageIndex struct {
	// Suite, Arch and Date say which list it is (Date from the Release
	// file, as the mirror wrote it).
	Suite, Arch, Date string
	// Release is the SHA-256 of the suite's Release file as the mirror
	// served it for this build, which names the version of every package
	// (a base's key: base.go); "" for a list kept from an earlier build
	// because the mirror did not answer.
	Release  string
	names    map[string]bool
	provided map[string][]string
}

// fetchTimeout bounds fetching the Release file and the Packages index.
const fetchTimeout = 5 * time.Minute

// packageListsDir holds the package lists, one per suite, architecture
// and index checksum.
func packageListsDir(cacheDir string) string { return filepath.Join(cacheDir, "package-lists") }

// debArch is the Debian name of the host's architecture: debootstrap
// builds for the host's.
func debArch() string {
	switch runtime.GOARCH {
	case "386":
		return "i386"
	case "arm":
		return "armhf"
	}
	return runtime.GOARCH
}

// defMirror is the line of debootstrap's script that names its default
// mirror.
var defMirror = regexp.MustCompile(`(?m)^DEF_MIRROR="([^"]+)"`)

// defaultMirror is the mirror debootstrap uses when none is given, read
// from its script.
func defaultMirror() (string, error) {
	ds, err := readDebootstrap()
	if err != nil {
		return "", fmt.Errorf("debootstrap's default mirror is not known: %w", err)
	}
	return ds.mirror, nil
}

// loadPackageIndex returns the package list of the mirror's suite (main
// component, the host's architecture). The list is kept in the cache under
// the checksum the suite's Release file gives its Packages index, so it is
// downloaded again only when the suite changes. A mirror that cannot be
// reached falls back to the newest list kept, and note says so.
func loadPackageIndex(ctx context.Context, mirror, suite, cacheDir string) (ix *packageIndex, note string, err error) {
	arch := debArch()
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	dir := packageListsDir(cacheDir)
	base := mirrorURL(mirror) + "/dists/" + suite + "/"
	release, err := fetch(ctx, base+"Release")
	if err != nil {
		kept, kerr := newestList(dir, suite, arch)
		if kerr != nil {
			return nil, "", fmt.Errorf("the mirror's Release file: %w", err)
		}
		ix, lerr := readList(kept)
		if lerr != nil {
			return nil, "", fmt.Errorf("the mirror's Release file: %w; the list kept: %w", err, lerr)
		}
		return ix, fmt.Sprintf("the mirror did not answer (%v): checked against the list of %s kept from an earlier build", err, ix.Date), nil
	}
	data, err := io.ReadAll(io.LimitReader(release, maxReleaseBytes+1))
	release.Close()
	if err == nil && len(data) > maxReleaseBytes {
		err = fmt.Errorf("it is larger than %d MiB", maxReleaseBytes>>20)
	}
	if err != nil {
		return nil, "", fmt.Errorf("the mirror's Release file for %s: %w", suite, err)
	}
	releaseSum := sha256.Sum256(data)
	rel, err := parseRelease(bytes.NewReader(data))
	if err != nil {
		return nil, "", fmt.Errorf("the mirror's Release file for %s: %w", suite, err)
	}
	index, ok := rel.files["main/binary-"+arch+"/Packages.gz"]
	if !ok {
		return nil, "", fmt.Errorf("the mirror's Release file for %s lists no main/binary-%s/Packages.gz", suite, arch)
	}
	path := filepath.Join(dir, fmt.Sprintf("%s_main_%s_%s", suite, arch, index.sha256))
	if ix, err := readList(path); err == nil {
		ix.Release = hex.EncodeToString(releaseSum[:])
		return ix, "", nil
	}
	ix, err = fetchIndex(ctx, base+"main/binary-"+arch+"/Packages.gz", index)
	if err != nil {
		return nil, "", err
	}
	ix.Suite, ix.Arch, ix.Date = suite, arch, rel.date
	ix.Release = hex.EncodeToString(releaseSum[:])
	if err := writeList(path, ix); err != nil {
		return nil, "", err
	}
	// The lists of this suite the mirror no longer serves.
	old, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("%s_main_%s_*", suite, arch)))
	for _, p := range old {
		if p != path {
			os.Remove(p)
		}
	}
	return ix, "", nil
}

// mirrorURL is a mirror without its trailing slashes.
func mirrorURL(mirror string) string { return strings.TrimRight(mirror, "/") }

// fetch opens a mirror's file: http(s) or file URLs, as debootstrap takes.
func fetch(ctx context.Context, rawURL string) (io.ReadCloser, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "file":
		return os.Open(u.Path)
	case "http", "https":
	default:
		return nil, fmt.Errorf("%s: only http, https and file mirrors are read", rawURL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %s", rawURL, resp.Status)
	}
	return resp.Body, nil
}

// releaseFile is what a Release file says: its date, and the checksum
// and size of each index file.
type releaseFile struct {
	date  string
	files map[string]indexFile
}

type indexFile struct {
	sha256 string
	size   int64
}

// maxReleaseBytes bounds a Release file (bookworm's is about 150 kB).
const maxReleaseBytes = 16 << 20

func parseRelease(r io.Reader) (releaseFile, error) {
	rel := releaseFile{files: map[string]indexFile{}}
	sc := bufio.NewScanner(io.LimitReader(r, maxReleaseBytes))
	inSums := false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, " ") {
			key, value, _ := strings.Cut(line, ":")
			inSums = key == "SHA256"
			if key == "Date" {
				rel.date = strings.TrimSpace(value)
			}
			continue
		}
		if !inSums {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return rel, fmt.Errorf("bad SHA256 line %q", line)
		}
		if sum, err := hex.DecodeString(f[0]); err != nil || len(sum) != sha256.Size {
			return rel, fmt.Errorf("bad SHA256 line %q", line)
		}
		size, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || size < 0 {
			return rel, fmt.Errorf("bad SHA256 line %q", line)
		}
		rel.files[f[2]] = indexFile{sha256: strings.ToLower(f[0]), size: size}
	}
	if err := sc.Err(); err != nil {
		return rel, err
	}
	if len(rel.files) == 0 {
		return rel, errors.New("it lists no SHA256 checksums")
	}
	return rel, nil
}

// fetchIndex downloads a Packages.gz and checks it against its Release
// line as it reads it.
func fetchIndex(ctx context.Context, rawURL string, want indexFile) (*packageIndex, error) {
	body, err := fetch(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("the mirror's package list: %w", err)
	}
	defer body.Close()
	h := sha256.New()
	counted := &countingReader{r: io.TeeReader(io.LimitReader(body, want.size+1), h)}
	zr, err := gzip.NewReader(counted)
	if err != nil {
		return nil, fmt.Errorf("the mirror's package list %s: %w", rawURL, err)
	}
	ix, err := parsePackages(zr)
	if err != nil {
		return nil, fmt.Errorf("the mirror's package list %s: %w", rawURL, err)
	}
	// What gzip did not need still counts toward the checksum.
	if _, err := io.Copy(io.Discard, counted); err != nil {
		return nil, fmt.Errorf("the mirror's package list %s: %w", rawURL, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); counted.n != want.size || got != want.sha256 {
		return nil, fmt.Errorf("the mirror's package list %s is not the one its Release file names (%d bytes, sha256 %s; want %d bytes, %s)", rawURL, counted.n, short(got), want.size, short(want.sha256))
	}
	return ix, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// parsePackages reads a Packages index: its Package and Provides fields.
func parsePackages(r io.Reader) (*packageIndex, error) {
	ix := &packageIndex{names: map[string]bool{}, provided: map[string][]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	pkg := ""
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			pkg = ""
			continue
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok || strings.HasPrefix(line, " ") {
			continue
		}
		switch key {
		case "Package":
			pkg = ""
			if f := strings.Fields(value); len(f) == 1 {
				pkg = f[0]
				ix.names[pkg] = true
			}
		case "Provides":
			if pkg == "" {
				continue
			}
			// "a (= 1.0), b:any"
			for _, p := range strings.Split(value, ",") {
				f := strings.Fields(p)
				if len(f) == 0 {
					continue
				}
				name, _, _ := strings.Cut(f[0], ":")
				if name != "" && !slices.Contains(ix.provided[name], pkg) {
					ix.provided[name] = append(ix.provided[name], pkg)
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(ix.names) == 0 {
		return nil, errors.New("it lists no packages")
	}
	return ix, nil
}

// The kept list: a header line, then "p NAME" for each package and
// "v NAME PROVIDER..." for each name only provided.
const listHeader = "warmdesk package list 1"

func writeList(path string, ix *packageIndex) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\t%s\t%s\t%s\n", listHeader, ix.Suite, ix.Arch, ix.Date)
	names := make([]string, 0, len(ix.names))
	for n := range ix.names {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "p %s\n", n)
	}
	virtual := make([]string, 0, len(ix.provided))
	for n := range ix.provided {
		virtual = append(virtual, n)
	}
	sort.Strings(virtual)
	for _, n := range virtual {
		fmt.Fprintf(&b, "v %s %s\n", n, strings.Join(ix.provided[n], " "))
	}
	// Two builds may write the same list at once: each its own file,
	// renamed into place whole.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".list-")
	if err != nil {
		return err
	}
	_, err = tmp.WriteString(b.String())
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("keep the package list: %w", err)
	}
	return nil
}

func readList(path string) (*packageIndex, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	head := strings.Split(lines[0], "\t")
	if len(head) != 4 || head[0] != listHeader {
		return nil, fmt.Errorf("%s is not a package list", path)
	}
	ix := &packageIndex{Suite: head[1], Arch: head[2], Date: head[3], names: map[string]bool{}, provided: map[string][]string{}}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "p":
			ix.names[f[1]] = true
		case len(f) >= 3 && f[0] == "v":
			ix.provided[f[1]] = f[2:]
		default:
			return nil, fmt.Errorf("%s: bad line %q", path, l)
		}
	}
	return ix, nil
}

// newestList is the most recently written list of a suite kept in dir.
func newestList(dir, suite, arch string) (string, error) {
	paths, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("%s_main_%s_*", suite, arch)))
	best, bestTime := "", time.Time{}
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.ModTime().After(bestTime) {
			best, bestTime = p, st.ModTime()
		}
	}
	if best == "" {
		return "", errors.New("no package list kept")
	}
	return best, nil
}

// has says whether apt can install a name: a package's, or one that
// packages provide.
func (ix *packageIndex) has(name string) bool {
	return ix.names[name] || len(ix.provided[name]) > 0
}

// unknown returns, for each name the index does not have, a phrase naming
// it, with the closest names it has.
func (ix *packageIndex) unknown(names []string) []string {
	var out []string
	for _, n := range names {
		if ix.has(n) {
			continue
		}
		msg := strconv.Quote(n)
		if close := ix.closest(n); len(close) > 0 {
			msg += " (did you mean " + strings.Join(close, " or ") + "?)"
		}
		out = append(out, msg)
	}
	return out
}

// closest returns up to three names at the smallest edit distance from
// name, when it is small for name's length.
func (ix *packageIndex) closest(name string) []string {
	limit := 1
	if len(name) >= 5 {
		limit = 2
	}
	if len(name) >= 12 {
		limit = 3
	}
	best := limit + 1
	var out []string
	for cand := range ix.names {
		// A bound of best+1 tells a tie from a farther name.
		d := textdist.Edit(name, cand, best+1)
		switch {
		case d < best:
			best, out = d, []string{cand}
		case d == best && d <= limit:
			out = append(out, cand)
		}
	}
	sort.Strings(out)
	if len(out) > 3 {
		out = out[:3]
	}
	return out
}
