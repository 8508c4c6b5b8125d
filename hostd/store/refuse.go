package store

import (
	"fmt"
	"os"
)

// RefuseFleet refuses to make a fleet host of a state directory whose
// single-host records (path) hold desktops or volumes: in a fleet the
// records are in etcd, so they would not be found, and the sweep at start
// would end the desktops' machines.
func RefuseFleet(path string) error {
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	st, err := Open(path)
	if err != nil {
		return err
	}
	defer st.Close()
	ds, err := st.LoadDesktops()
	if err != nil {
		return err
	}
	vs, err := st.LoadVolumes()
	if err != nil {
		return err
	}
	if len(ds) > 0 || len(vs) > 0 {
		return fmt.Errorf("fleet: %s holds %d desktops and %d volumes of this host as a single host, which a fleet host would not find (its records are in etcd), and the desktops' machines it would end: delete them with hostd started without --cluster-name, or use another --state-dir", path, len(ds), len(vs))
	}
	return nil
}
