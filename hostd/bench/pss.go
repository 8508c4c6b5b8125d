package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// parsePSS reads the Pss line of /proc/PID/smaps_rollup, in kB.
func parsePSS(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[0] == "Pss:" && f[2] == "kB" {
			v, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || v < 0 {
				return 0, fmt.Errorf("smaps_rollup: bad Pss %q", f[1])
			}
			return v, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("smaps_rollup: no Pss line")
}

// processPSS returns a process's proportional set size in bytes: its
// private memory plus its share of memory it maps with others (the
// template's memory file, shared libraries).
func processPSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	kb, err := parsePSS(f)
	return kb * 1024, err
}

// pssParts is a QEMU process's PSS by what the memory holds, in kB.
type pssParts struct {
	// GuestShared is the guest RAM's share of the snapshot's memory file
	// (pages the guest has only read, shared by every clone);
	// GuestDirtied, the guest pages written since the restore (copied on
	// write, private).
	GuestShared, GuestDirtied int64
	// TCG is the translation cache (an anonymous read-write-execute
	// mapping, present only under TCG).
	TCG int64
	// Anon is QEMU's other private memory: its heap, thread stacks and
	// device memory such as the display's.
	Anon int64
	// Files is the binary's and the libraries' share.
	Files int64
}

func (p pssParts) total() int64 { return p.GuestShared + p.GuestDirtied + p.TCG + p.Anon + p.Files }

// parseSmaps sorts the mappings of /proc/PID/smaps into pssParts; guestRAM
// is the path of the file the guest's RAM maps (the snapshot's memory).
func parseSmaps(r io.Reader, guestRAM string) (pssParts, error) {
	var parts pssParts
	var pss, anon int64
	kind := ""
	flush := func() {
		switch kind {
		case "guest":
			dirtied := min(anon, pss)
			parts.GuestDirtied += dirtied
			parts.GuestShared += pss - dirtied
		case "tcg":
			parts.TCG += pss
		case "anon":
			parts.Anon += pss
		case "file":
			parts.Files += pss
		}
		pss, anon = 0, 0
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	mappings, guests := 0, 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if k, ok := mappingKind(f, guestRAM); ok {
			flush()
			kind = k
			mappings++
			if k == "guest" {
				guests++
			}
			continue
		}
		if len(f) != 3 || f[2] != "kB" || kind == "" {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || v < 0 {
			return pssParts{}, fmt.Errorf("smaps: bad %s %q", f[0], f[1])
		}
		switch f[0] {
		case "Pss:":
			pss = v
		case "Anonymous:":
			anon = v
		}
	}
	if err := sc.Err(); err != nil {
		return pssParts{}, err
	}
	flush()
	if mappings == 0 {
		return pssParts{}, fmt.Errorf("smaps: no mappings")
	}
	if guestRAM != "" && guests == 0 {
		return pssParts{}, fmt.Errorf("smaps: no mapping of the guest RAM's file %s", guestRAM)
	}
	return parts, nil
}

// mappingKind tells a mapping's header line ("start-end perms offset dev
// inode [path]") from its fields, and what the mapping holds.
func mappingKind(f []string, guestRAM string) (string, bool) {
	if len(f) < 5 || !strings.Contains(f[0], "-") || len(f[1]) != 4 || !strings.Contains(f[3], ":") {
		return "", false
	}
	// A file removed while mapped (a snapshot baked again) says so.
	path := strings.TrimSuffix(strings.Join(f[5:], " "), " (deleted)")
	switch {
	case path == guestRAM && guestRAM != "":
		return "guest", true
	case path == "" && f[1] == "rwxp":
		return "tcg", true
	case path == "" || strings.HasPrefix(path, "[") || strings.HasPrefix(path, "/memfd:"):
		return "anon", true
	default:
		return "file", true
	}
}

// processPSSParts reads a process's PSS by part, in kB.
func processPSSParts(pid int, guestRAM string) (pssParts, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return pssParts{}, err
	}
	defer f.Close()
	return parseSmaps(f, guestRAM)
}
