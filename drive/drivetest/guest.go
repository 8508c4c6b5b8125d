package drivetest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/warmdesk/warmdesk/desktop/desktoptest"
)

// Guest answers, on a desktoptest.Guest, the helper scripts the drive
// service runs in a desktop as a Debian guest with X would: mv and rm for
// uploads, xclip for the clipboard, xdotool for the pointer's position,
// xmodmap and xdotool for typing text the US layout cannot (whose text it
// decodes back, see Typed), the window helper (perl: the list and its
// operations, on Windows), and the wrapper of a streaming exec. Every
// other program goes to Program.
type Guest struct {
	*desktoptest.Guest
	// Program runs a program that is not one of the service's helpers; nil
	// answers exit status 127.
	Program func(ctx context.Context, c desktoptest.GuestCmd) (desktoptest.GuestResult, error)
	// Typing, when set, runs before typed text is recorded; an error
	// fails the typing as an agent that does not answer would.
	Typing func(ctx context.Context, text string) error

	mu      sync.Mutex
	clip    map[string]string
	typed   []string
	pointer *[2]int
	wm      windowManager
}

// NewGuest returns a guest with no files and an empty clipboard, installed
// on the fake driver (set it before the first desktop starts).
func NewGuest(drv *desktoptest.Fake) *Guest {
	g := &Guest{Guest: desktoptest.NewGuest(), clip: map[string]string{}, wm: newWindowManager()}
	for _, dir := range []string{"/tmp", "/root", "/home", "/home/user"} {
		g.MkDir(dir)
	}
	g.Guest.Run = g.run
	drv.Guest = g.Guest
	return g
}

// SetPointer is where xdotool says the pointer is.
func (g *Guest) SetPointer(x, y int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pointer = &[2]int{x, y}
}

// Clipboard is what an X selection holds.
func (g *Guest) Clipboard(selection string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.clip[selection]
}

// Typed lists the texts typed through the guest, in order.
func (g *Guest) Typed() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.typed...)
}

func ok(out string) (desktoptest.GuestResult, error) {
	return desktoptest.GuestResult{Stdout: []byte(out)}, nil
}

func failed(code int, stderr string) (desktoptest.GuestResult, error) {
	return desktoptest.GuestResult{ExitCode: code, Stderr: []byte(stderr)}, nil
}

func (g *Guest) run(ctx context.Context, c desktoptest.GuestCmd) (desktoptest.GuestResult, error) {
	if c.Path == "/bin/rm" && len(c.Args) > 0 {
		g.Remove(c.Args[len(c.Args)-1])
		return ok("")
	}
	if c.Path == "perl" && len(c.Args) >= 4 && c.Args[0] == "-e" && c.Args[2] == "--" {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.wm.run(c.Args[4:]) // after the helper's time limit
	}
	if c.Path != "/bin/sh" || len(c.Args) < 3 || c.Args[0] != "-c" {
		return g.program(ctx, c)
	}
	script, args := c.Args[1], c.Args[3:] // after $0
	switch {
	case strings.Contains(script, "mv -fT") && len(args) == 2:
		if g.IsDir(args[1]) {
			return failed(1, "mv: cannot overwrite directory '"+args[1]+"' with non-directory")
		}
		if !g.Rename(args[0], args[1]) {
			return failed(1, "mv: cannot stat '"+args[0]+"': No such file or directory")
		}
		return ok("")
	case strings.Contains(script, "xclip") && len(args) == 1:
		return g.xclip(script, args[0], string(c.Stdin))
	case strings.Contains(script, "getmouselocation"):
		g.mu.Lock()
		p := g.pointer
		g.mu.Unlock()
		if p == nil {
			return failed(1, "Can't open display")
		}
		return ok(fmt.Sprintf("X=%d\nY=%d\nSCREEN=0\nWINDOW=1\n", p[0], p[1]))
	case strings.Contains(script, "xmodmap -pke"):
		return ok("200\n201\n202\n203\n")
	case strings.Contains(script, "xdotool key"):
		text := typedText(script)
		if g.Typing != nil {
			if err := g.Typing(ctx, text); err != nil {
				return desktoptest.GuestResult{}, err
			}
		}
		g.mu.Lock()
		g.typed = append(g.typed, text)
		g.mu.Unlock()
		return ok("")
	case len(args) >= 3 && strings.HasPrefix(args[0], "/tmp/.warmdesk-exec-"):
		// A streaming exec: the program's output goes into two files.
		prog := desktoptest.Unwrap(desktoptest.GuestCmd{Path: args[2], Args: args[3:], Stdin: c.Stdin})
		res, err := g.program(ctx, prog)
		if err != nil {
			return res, err
		}
		g.SetFile(args[0], res.Stdout)
		g.SetFile(args[1], res.Stderr)
		return desktoptest.GuestResult{ExitCode: res.ExitCode}, nil
	}
	return g.program(ctx, c)
}

func (g *Guest) xclip(script, selection, stdin string) (desktoptest.GuestResult, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !strings.Contains(script, " -o") {
		g.clip[selection] = stdin
		return ok("")
	}
	text, set := g.clip[selection]
	if !set {
		return failed(1, "Error: target STRING not available")
	}
	return ok(text)
}

func (g *Guest) program(ctx context.Context, c desktoptest.GuestCmd) (desktoptest.GuestResult, error) {
	if g.Program == nil {
		return failed(127, c.Path+": not found")
	}
	return g.Program(ctx, c)
}

// typedText decodes the keysyms of a typing script's xdotool lines.
func typedText(script string) string {
	var b strings.Builder
	for _, line := range strings.Split(script, "\n") {
		rest, found := strings.CutPrefix(line, "xdotool key --clearmodifiers --delay 0 ")
		if !found {
			continue
		}
		for _, sym := range strings.Fields(rest) {
			switch sym {
			case "Return":
				b.WriteRune('\n')
			case "Tab":
				b.WriteRune('\t')
			default:
				if n, err := strconv.ParseUint(strings.TrimPrefix(sym, "U"), 16, 32); err == nil {
					b.WriteRune(rune(n))
				}
			}
		}
	}
	return b.String()
}
