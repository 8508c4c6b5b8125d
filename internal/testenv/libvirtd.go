package testenv

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// libvirtdLock is one lock file for every test process that talks to the
// host's libvirtd. A test that restarts libvirtd holds it exclusively;
// the others hold it shared, so a restart in one package (run side by
// side with the others by scripts/test) never lands under another's
// create.
var libvirtdLock struct {
	sync.Mutex
	f      *os.File
	shared int
}

func libvirtdLockFile(t testing.TB) *os.File {
	t.Helper()
	if libvirtdLock.f == nil {
		path := filepath.Join(os.TempDir(), "warmdesk-libvirtd.lock")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			t.Fatalf("open the libvirtd test lock: %v", err)
		}
		libvirtdLock.f = f
	}
	return libvirtdLock.f
}

func flock(t testing.TB, f *os.File, how int) {
	t.Helper()
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("lock the libvirtd test lock: %v", err)
		}
		return
	}
}

// UsesLibvirtd holds libvirtd for the rest of the test: a test that
// restarts it (RestartsLibvirtd) waits until the test ends.
func UsesLibvirtd(t testing.TB) {
	t.Helper()
	libvirtdLock.Lock()
	defer libvirtdLock.Unlock()
	f := libvirtdLockFile(t)
	if libvirtdLock.shared == 0 {
		flock(t, f, syscall.LOCK_SH)
	}
	libvirtdLock.shared++
	t.Cleanup(func() {
		libvirtdLock.Lock()
		defer libvirtdLock.Unlock()
		libvirtdLock.shared--
		if libvirtdLock.shared == 0 {
			syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		}
	})
}

// RestartsLibvirtd holds libvirtd alone until release: it waits for every
// other process's tests that use it to end. The calling process's own
// holds (UsesLibvirtd) are converted, not waited for.
func RestartsLibvirtd(t testing.TB) (release func()) {
	t.Helper()
	libvirtdLock.Lock()
	f := libvirtdLockFile(t)
	flock(t, f, syscall.LOCK_EX)
	return func() {
		if libvirtdLock.shared > 0 {
			flock(t, f, syscall.LOCK_SH)
		} else {
			syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		}
		libvirtdLock.Unlock()
	}
}
