package libvirt

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

func TestParseURI(t *testing.T) {
	for _, c := range []struct{ uri, socket string }{
		{"qemu:///system", "/var/run/libvirt/libvirt-sock"},
		{"qemu+unix:///system", "/var/run/libvirt/libvirt-sock"},
		{"qemu:///system?socket=/tmp/x.sock", "/tmp/x.sock"},
	} {
		_, s, err := parseURI(c.uri)
		if err != nil || s != c.socket {
			t.Errorf("parseURI(%q) = %q, %v; want %q", c.uri, s, err, c.socket)
		}
	}
	for _, bad := range []string{"qemu+ssh://host/system", "qemu+tcp://host/system", "qemu://host/system", "xen:///system", "qemu:///nowhere", "::"} {
		if _, _, err := parseURI(bad); !errors.Is(err, desktop.ErrInvalid) {
			t.Errorf("parseURI(%q): %v, want ErrInvalid", bad, err)
		}
	}
}

// With no libvirtd behind the socket, New fails at once with one error
// that says what to start, and no retrying.
func TestNewWithoutLibvirtdSaysWhatToStart(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	_, err := New(context.Background(), Options{
		URI:    "qemu:///system?socket=" + filepath.Join(dir, "no-libvirtd.sock"),
		RunDir: filepath.Join(dir, "run"), DataDir: filepath.Join(dir, "data"),
	})
	if !errors.Is(err, desktop.ErrUnavailable) {
		t.Fatalf("New without libvirtd: %v, want ErrUnavailable", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "libvirtd") || !(strings.Contains(msg, "libvirtd -d") || strings.Contains(msg, "apt-get install")) {
		t.Errorf("the error does not say what to install or start: %s", msg)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("New took %s to give up", took)
	}
}

func TestParseUUID(t *testing.T) {
	u, err := parseUUID("3d99048d-b2b7-43a1-b6f2-8f715ae09bfc")
	if err != nil || u[0] != 0x3d || u[15] != 0xfc {
		t.Errorf("parseUUID = %x, %v", u, err)
	}
	for _, bad := range []string{"", "3d99048d", "zz99048d-b2b7-43a1-b6f2-8f715ae09bfc", "3d99048d-b2b7-43a1-b6f2-8f715ae09bfcff"} {
		if _, err := parseUUID(bad); err == nil {
			t.Errorf("parseUUID(%q) succeeded", bad)
		}
	}
	for range 100 {
		s := newUUID()
		if _, err := parseUUID(s); err != nil || s[14] != '4' {
			t.Fatalf("newUUID made %q (%v)", s, err)
		}
	}
}

func TestParseQMPReply(t *testing.T) {
	ret, err := parseQMPReply([]byte(`{"return":{"status":"running"},"id":"libvirt-12"}`))
	if err != nil || string(ret) != `{"status":"running"}` {
		t.Errorf("return: %s, %v", ret, err)
	}
	_, err = parseQMPReply([]byte(`{"id":"libvirt-13","error":{"class":"GenericError","desc":"No such node"}}`))
	var qe *QMPError
	if !errors.As(err, &qe) || qe.Desc != "No such node" {
		t.Errorf("error reply: %v", err)
	}
	for _, bad := range []string{``, `{}`, `[]`, `{"return":`, `null`} {
		if _, err := parseQMPReply([]byte(bad)); err == nil {
			t.Errorf("parseQMPReply(%q) succeeded", bad)
		}
	}
}

func TestParseAgentChannel(t *testing.T) {
	live := `<domain><devices>
  <channel type='unix'><source mode='bind' path='/x/org.qemu.guest_agent.0'/>
    <target type='virtio' name='org.qemu.guest_agent.0' state='connected'/></channel>
  <channel type='unix'><target type='virtio' name='other' state='disconnected'/></channel>
</devices></domain>`
	if s, p := parseAgentChannel(live); s != agentConnected || p != "/x/org.qemu.guest_agent.0" {
		t.Errorf("connected channel read as %d at %q", s, p)
	}
	if s, _ := parseAgentChannel(strings.Replace(live, "'connected'", "'disconnected'", 1)); s != agentDisconnected {
		t.Errorf("disconnected channel read as %d", s)
	}
	if s, p := parseAgentChannel(`<domain><devices/></domain>`); s != agentUnknown || p != "" {
		t.Errorf("no channel read as %d at %q", s, p)
	}
}

func TestSnapshotXML(t *testing.T) {
	b, err := snapshotXML("/var/w/d-1/disk-1.qcow2")
	if err != nil {
		t.Fatal(err)
	}
	want := `<domainsnapshot><disks><disk name="vda" snapshot="external" type="file"><driver type="qcow2"></driver><source file="/var/w/d-1/disk-1.qcow2"></source></disk></disks></domainsnapshot>`
	if string(b) != want {
		t.Errorf("snapshot XML:\n%s\nwant\n%s", b, want)
	}
}

func TestAgentTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	if got := agentTimeout(ctx); got != 3 {
		t.Errorf("2.5 s left: timeout %d, want 3", got)
	}
	if got := agentTimeout(context.Background()); got != int32(agentNoDeadline/time.Second) {
		t.Errorf("no deadline: timeout %d", got)
	}
	past, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	if got := agentTimeout(past); got != 1 {
		t.Errorf("past deadline: timeout %d, want 1", got)
	}
}

func TestStopReasonsAreWorded(t *testing.T) {
	for d := int32(0); d <= 6; d++ {
		if r := stopReason(d); strings.Contains(r, "detail") {
			t.Errorf("stop detail %d unworded: %s", d, r)
		}
	}
	if r := stopReason(99); !strings.Contains(r, "99") {
		t.Errorf("unknown detail: %s", r)
	}
}

// A QEMU in libvirt's own per-domain cgroup is left to libvirt; one in
// libvirtd's cgroup (the test configuration's, a container's) is not.
func TestPlacedByLibvirt(t *testing.T) {
	for in, want := range map[string]bool{
		"4:memory:/machine/qemu-1-warmdesk-d-1.libvirt-qemu\n1:cpu:/machine/qemu-1-warmdesk-d-1.libvirt-qemu\n": true,
		"0::/machine.slice/machine-qemu\\x2d1\\x2dwarmdesk.scope\n":                                             true,
		"9:name=systemd:/\n4:memory:/process_api/942558d2\n1:cpu:/\n0::/\n":                                     false,
	} {
		got, err := placedByLibvirt(in)
		if err != nil || got != want {
			t.Errorf("placedByLibvirt(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := placedByLibvirt("not a cgroup line"); err == nil {
		t.Error("an unreadable /proc/PID/cgroup was taken")
	}
}

// The disk a desktop's id owns goes back to root when its domain ends, and
// nothing given after that (a failed freeze undoing itself late) reaches
// the id, which may be another desktop's by then.
func TestAnEndedUserOwnsNothingMore(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changes files' owners: run as root")
	}
	dir := t.TempDir()
	disk, late := filepath.Join(dir, "disk-0.qcow2"), filepath.Join(dir, "disk-1.qcow2")
	for _, p := range []string{disk, late} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	u := &machineUser{owner: qemuvm.Owner{UID: 900000123, GID: 900000123}, log: slog.New(slog.DiscardHandler)}
	if err := u.own(disk); err != nil {
		t.Fatal(err)
	}
	if uid := fileUID(t, disk); uid != 900000123 {
		t.Fatalf("the disk is uid %d's, want the desktop's", uid)
	}
	u.release()
	if err := u.own(late); err != nil {
		t.Fatal(err)
	}
	if uid := fileUID(t, disk); uid != 0 {
		t.Errorf("after the end the disk is uid %d's, want root's", uid)
	}
	if uid := fileUID(t, late); uid != 0 {
		t.Errorf("a file given after the end is uid %d's, want root's", uid)
	}
}

// A sweep keeps a hibernated desktop's data directory, its files root's.
func TestRootOwnsFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changes files' owners: run as root")
	}
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk-0.qcow2")
	if err := os.WriteFile(disk, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(disk, 900000123, 900000123); err != nil {
		t.Fatal(err)
	}
	if err := rootOwnsFiles(dir); err != nil {
		t.Fatal(err)
	}
	if uid := fileUID(t, disk); uid != 0 {
		t.Errorf("the disk is uid %d's, want root's", uid)
	}
}

func TestStrandedUsersWaitForCleanup(t *testing.T) {
	d := &Driver{}
	u := &machineUser{}
	d.strand("d-1", u)
	d.strand("d-2", nil)
	if got := d.unstrand("d-1"); got != u {
		t.Errorf("unstrand d-1 = %p, want the stranded user %p", got, u)
	}
	if got := d.unstrand("d-1"); got != nil {
		t.Errorf("a second unstrand gave %p, want nil", got)
	}
	if got := d.unstrand("d-2"); got != nil {
		t.Errorf("a nil user was stranded: %p", got)
	}
}

func fileUID(t *testing.T, path string) uint32 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid
}
