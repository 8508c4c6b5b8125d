package qemu

// SetBeforeRestore has fn see each clone's QEMU pid just before its state
// loads.
func SetBeforeRestore(d *Driver, fn func(pid int)) {
	d.beforeRestore = func(m *Machine) { fn(m.Pid()) }
}
