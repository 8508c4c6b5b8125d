package images

import (
	"fmt"
	"strings"
)

// appScriptPath is where a recipe's app i is started from: the session
// runs apps.d in name order, after the flavor's own (10-xterm,
// 20-chromium).
func appScriptPath(i int, a App) string {
	return fmt.Sprintf("/usr/local/lib/warmdesk/apps.d/50-%02d-%s", i+1, a.Name)
}

// appScript starts an app in the background and returns once its
// readiness check passes; past its timeout it says why on the console and
// exits 1, and the session reports the desktop failed. The check is
// polled: a window title, a listening port, a file or a command's exit
// has no event a shell script could wait on, and the deadline bounds it;
// each try of a window or command check is cut at 10 s, so one that hangs
// cannot outlast the deadline by more.
func appScript(a App) string {
	out := "/run/app-" + a.Name + ".out"
	check, what := readyTest(a.Ready)
	var b strings.Builder
	fmt.Fprintf(&b, `#!/bin/sh
# App %[1]s, from the recipe: started in the background, ready when %[2]s.
say() { echo "warmdesk: $*" > /dev/ttyS0; }
what=%[7]s
cd /root
setsid sh -c %[3]s >>%[4]s 2>&1 </dev/null &
deadline=$(( $(date +%%s) + %[5]d ))
until %[6]s; do
  if [ "$(date +%%s)" -ge "$deadline" ]; then
    say "app %[1]s not ready after %[5]ds: waited for $what; its last output: $(tail -n 5 %[4]s | tr '\n' ' ')"
    exit 1
  fi
  sleep 0.2
done
say "app %[1]s ready"
`, a.Name, strings.ReplaceAll(what, "\n", " "), shellQuote(a.Run), out, int(a.Timeout), check, shellQuote(what))
	return b.String()
}

// readyTest is the shell test for a check, and a phrase for people.
func readyTest(c ReadyCheck) (test, what string) {
	switch {
	case c.Window != "":
		return "timeout 10 xdotool search --onlyvisible --name " + shellQuote(c.Window) + " >/dev/null 2>&1",
			"a window titled like " + c.Window
	case c.Port != 0:
		return fmt.Sprintf("ss -Hltn 'sport = :%d' | grep -q .", c.Port), fmt.Sprintf("TCP port %d to listen", c.Port)
	case c.File != "":
		return "[ -e " + shellQuote(c.File) + " ]", "the file " + c.File
	default:
		return "timeout 10 sh -c " + shellQuote(c.Command) + " >/dev/null 2>&1", "the command " + c.Command + " to succeed"
	}
}

// shellQuote quotes s as one word for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
