package desktop

import (
	"os"
	"syscall"
)

// FaultEnv names the kill point at which hostd ends itself with SIGKILL,
// as a crash would end it. Only the crash tests (hostd/faults) set it.
const FaultEnv = "WARMDESK_FAULT"

// The kill points, in the order of the table in docs/SECURITY.md: each
// sits where a crash leaves the most to recover.
const (
	// After the creating record is written, before the machine starts.
	FaultCreateRecorded = "create.recorded"
	// After the machine runs, before the record says so.
	FaultCreateRestored = "create.restored"
	// A running source stopped for a snapshot (or fork), its template
	// QEMU started, nothing copied yet.
	FaultSnapshotSourceStopped = "snapshot.source-stopped"
	// The source's memory copied into the template, not yet saved.
	FaultSnapshotMemoryCopied = "snapshot.memory-copied"
	// The snapshot committed to the catalog, the desktop's record not
	// yet updated to use it.
	FaultSnapshotCommitted = "snapshot.committed"
	// A fork's template snapshot committed, no copy made yet.
	FaultForkSnapshotted = "fork.snapshotted"
	// The hibernation's migration under way: QEMU writes on into the
	// state file without hostd.
	FaultHibernateMigrating = "hibernate.migrating"
	// The hibernation state written whole, QEMU not yet ended.
	FaultHibernateStateWritten = "hibernate.state-written"
	// QEMU ended with its state saved, the record still says running.
	FaultHibernateSaved = "hibernate.saved"
	// The woken machine runs, the record still says hibernated.
	FaultWakeRestored = "wake.restored"
)

// FaultPoints are every kill point.
var FaultPoints = []string{
	FaultCreateRecorded, FaultCreateRestored,
	FaultSnapshotSourceStopped, FaultSnapshotMemoryCopied, FaultSnapshotCommitted,
	FaultForkSnapshotted,
	FaultHibernateMigrating, FaultHibernateStateWritten, FaultHibernateSaved,
	FaultWakeRestored,
}

var armedFault = os.Getenv(FaultEnv)

// Fault ends the process with SIGKILL when FaultEnv names point; otherwise
// it does nothing.
func Fault(point string) {
	if armedFault != "" && armedFault == point {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}
