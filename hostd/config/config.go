// Package config holds hostd's settings: where it keeps its state, cache
// and sockets, how it listens, and the host's caps, with defaults and the
// flags and environment variables that change them.
package config

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/confine"
	"github.com/warmdesk/warmdesk/fleet"
)

// Paths are where hostd keeps things.
type Paths struct {
	// StateDir holds the records store, snapshots, desktop disks and the
	// API token. Snapshots and desktop disks share it so that freezing a
	// disk into a snapshot is a hard link.
	StateDir string
	// CacheDir holds built images (by recipe hash) and downloaded packages.
	CacheDir string
	// RunDir holds each desktop's sockets.
	RunDir string
}

// Default locations, each overridable by an environment variable.
func DefaultPaths() Paths {
	return Paths{
		StateDir: env("WARMDESK_STATE_DIR", "/var/lib/warmdesk"),
		CacheDir: env("WARMDESK_CACHE_DIR", "/var/cache/warmdesk"),
		RunDir:   env("WARMDESK_RUN_DIR", "/run/warmdesk"),
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Register adds the path flags to a flag set.
func (p *Paths) Register(fs *flag.FlagSet) {
	fs.StringVar(&p.StateDir, "state-dir", p.StateDir, "records, snapshots, desktop disks and the API token (env WARMDESK_STATE_DIR)")
	fs.StringVar(&p.CacheDir, "cache-dir", p.CacheDir, "built images and downloaded packages (env WARMDESK_CACHE_DIR)")
	fs.StringVar(&p.RunDir, "run-dir", p.RunDir, "desktop sockets (env WARMDESK_RUN_DIR)")
}

// Derived paths.
func (p Paths) Snapshots() string   { return filepath.Join(p.StateDir, "snapshots") }
func (p Paths) Desktops() string    { return filepath.Join(p.StateDir, "desktops") }
func (p Paths) Records() string     { return filepath.Join(p.StateDir, "records.db") }
func (p Paths) TokenFile() string   { return filepath.Join(p.StateDir, "token") }
func (p Paths) AddressFile() string { return filepath.Join(p.StateDir, "address") }
func (p Paths) Volumes() string     { return filepath.Join(p.StateDir, "volumes") }

// Recordings holds recordings of desktops' screens; they do not outlive
// the hostd that made them.
func (p Paths) Recordings() string { return filepath.Join(p.StateDir, "recordings") }

// MakeStateDirs makes the state, snapshot, desktop and run directories
// (0700) and lets other users through the state directory (0711):
// desktops' QEMU processes, each its own user, pass through it to their
// own directories under desktops/; what else it holds is 0600 or 0700.
// Every command that starts QEMU calls it first.
func (p Paths) MakeStateDirs() error {
	for _, dir := range []string{p.StateDir, p.Snapshots(), p.Desktops(), p.RunDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("state directories: %w", err)
		}
	}
	if err := os.Chmod(p.StateDir, 0o711); err != nil {
		return fmt.Errorf("state directories: %w", err)
	}
	return nil
}

// DefaultListen is where hostd serves its API and pages.
const DefaultListen = "127.0.0.1:8787"

// Serve is the daemon's configuration.
type Serve struct {
	Paths
	Listen string
	Driver string // qemu or libvirt
	Accel  string // auto, kvm, tcg
	// LibvirtURI is the libvirtd connection for --driver libvirt.
	LibvirtURI string
	Limits     desktop.Limits
	// HibernateOnStop hibernates running desktops when hostd stops,
	// instead of leaving them running for the next hostd.
	HibernateOnStop bool
	ShutdownGrace   time.Duration
	// NoSandbox turns QEMU's seccomp sandbox off (debugging only).
	NoSandbox bool
	// QEMUUIDs is the range of user ids machines' QEMU processes run as,
	// FIRST-LAST; empty for the driver's default, "off" to run them as
	// hostd's user (the QEMU driver) or libvirt's qemu.conf user.
	QEMUUIDs string
	// NoCgroups keeps desktops' QEMU processes in hostd's cgroup.
	NoCgroups bool
	// E2BTemplates maps E2B template ids to snapshots (the E2B front door
	// at /e2b); E2BDomain is the domain it gives sandboxes, for the URLs
	// the SDK builds from it.
	E2BTemplates map[string]string
	E2BDomain    string
	// E2BGuestOnly runs every E2B command in the guest, turning the fast
	// paths for the SDK's screenshot and pointer commands off.
	E2BGuestOnly bool
	// MaxViewersPerDesktop and MaxViewersPerToken cap the VNC WebSockets
	// open at once; ScreenshotEncodes the screenshot encodes running at
	// once across all desktops (0: max(2, GOMAXPROCS)).
	MaxViewersPerDesktop, MaxViewersPerToken int
	ScreenshotEncodes                        int
	// HeaderTimeout bounds reading a request's headers; IdleTimeout closes
	// idle keep-alive connections.
	HeaderTimeout, IdleTimeout time.Duration
	// Cluster makes this hostd one host of a fleet (docs/FLEET.md); its
	// Name empty, hostd is a single host on its bbolt records.
	Cluster Cluster
}

// Cluster is a fleet host's configuration: its embedded etcd member and
// its membership.
type Cluster struct {
	Name  string // --cluster-name
	Host  string // this host's name among Peers
	Peers string // NAME=ADDRESS,...
	// PeerPort and ClientPort are where each host's etcd member listens.
	PeerPort, ClientPort int
	// Certs is the directory `hostd cluster certs` wrote: etcd's TLS and
	// the mutual TLS of the hosts' peer API.
	Certs string
	// APIPort is where the hosts call each other's API (mutual TLS), on
	// --listen's address; 0 picks a free port.
	APIPort int
	// Join starts this host's etcd member into the running fleet, which
	// was told of it (hostd cluster member add).
	Join bool
	// Lease bounds how long a host that died stays listed.
	Lease time.Duration
	// Advertise is the API address other hosts and clients reach this
	// host at; empty: its peer address with --listen's port.
	Advertise string
	// Endpoints, when set, are an existing etcd's client URLs: no member
	// is embedded, and Peers are not used. EtcdCA, EtcdCert and
	// EtcdKey are the client TLS files for it (https endpoints).
	Endpoints                 string
	EtcdCA, EtcdCert, EtcdKey string
}

// Node is the fleet node's configuration for this host, whose member
// keeps its data under stateDir and whose token file is tokenFile.
func (c Cluster) Node(stateDir, tokenFile string) fleet.NodeConfig {
	return fleet.NodeConfig{
		Cluster: c.Name, Host: c.Host, Peers: c.Peers, Certs: c.Certs, PeerPort: c.PeerPort, ClientPort: c.ClientPort, APIPort: c.APIPort, Join: c.Join,
		Advertise: c.Advertise, Endpoints: c.Endpoints, EtcdCA: c.EtcdCA, EtcdCert: c.EtcdCert, EtcdKey: c.EtcdKey,
		Lease: c.Lease, StateDir: stateDir, TokenFile: tokenFile,
	}
}

// DefaultServe returns the defaults.
func DefaultServe() Serve {
	return Serve{
		Paths: DefaultPaths(), Listen: env("WARMDESK_LISTEN", DefaultListen),
		Driver: "qemu", Accel: "auto", LibvirtURI: "qemu:///system",
		Limits: desktop.DefaultLimits(), ShutdownGrace: 30 * time.Second,
		MaxViewersPerDesktop: 16, MaxViewersPerToken: 4,
		HeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		Cluster: Cluster{Host: hostname(), PeerPort: 2380, ClientPort: 2379, APIPort: 8788, Lease: 10 * time.Second},
	}
}

// Register adds the daemon's flags.
func (s *Serve) Register(fs *flag.FlagSet) {
	s.Paths.Register(fs)
	fs.StringVar(&s.Listen, "listen", s.Listen, "address of the API and pages (env WARMDESK_LISTEN)")
	fs.StringVar(&s.Driver, "driver", s.Driver, "hypervisor driver: qemu or libvirt")
	fs.StringVar(&s.Accel, "accel", s.Accel, "accelerator: auto, kvm or tcg")
	fs.StringVar(&s.LibvirtURI, "libvirt-uri", s.LibvirtURI, "libvirtd connection, for --driver libvirt")
	fs.IntVar(&s.Limits.MaxDesktops, "max-desktops", s.Limits.MaxDesktops, "host cap on desktops holding resources")
	fs.IntVar(&s.Limits.MaxMemoryMiB, "max-memory-mib", s.Limits.MaxMemoryMiB, "host cap on the sum of desktops' guest memory, MiB")
	fs.IntVar(&s.Limits.MinFreeMiB, "min-free-mib", s.Limits.MinFreeMiB, "free space on the state directory's disk below which creates, forks, wakes and snapshots are refused (507), MiB; 0: no check")
	fs.Float64Var(&s.Limits.MaxCPUPressure, "max-cpu-pressure", s.Limits.MaxCPUPressure, "host CPU pressure (the share of the last 10 s in which work waited for a CPU, 0 to 1) at or above which creates, forks and wakes queue, then answer 503 with Retry-After; 0: no admission by CPU")
	fs.IntVar(&s.Limits.MaxCPUQueue, "max-cpu-queue", s.Limits.MaxCPUQueue, "creates, forks and wakes that may wait for CPU at once; one more answers 503 at once")
	fs.DurationVar(&s.Limits.CPUQueueWait, "cpu-queue-wait", s.Limits.CPUQueueWait, "how long a create, fork or wake waits for the CPU pressure to fall below --max-cpu-pressure before answering 503")
	fs.IntVar(&s.Limits.PoolSize, "pool", s.Limits.PoolSize, "machines restored and warmed up ahead per snapshot (warm pool)")
	fs.IntVar(&s.Limits.MaxFork, "max-fork", s.Limits.MaxFork, "most copies one fork may make")
	fs.IntVar(&s.Limits.MaxDiskMiB, "max-disk-mib", s.Limits.MaxDiskMiB, "largest disk_mib a desktop may ask for, and largest volume, MiB")
	fs.DurationVar(&s.Limits.MaxTTL, "max-ttl", s.Limits.MaxTTL, "longest TTL a desktop may ask for")
	fs.IntVar(&s.MaxViewersPerDesktop, "max-viewers-per-desktop", s.MaxViewersPerDesktop, "VNC WebSockets (viewers) one desktop may have open at once; one more answers 429")
	fs.IntVar(&s.MaxViewersPerToken, "max-viewers-per-token", s.MaxViewersPerToken, "viewers one share link (per-desktop token) may have open at once; one more answers 429")
	fs.IntVar(&s.ScreenshotEncodes, "screenshot-encodes", s.ScreenshotEncodes, "screenshot encodes running at once across all desktops, the others wait their turn; 0: max(2, CPUs)")
	fs.DurationVar(&s.HeaderTimeout, "http-header-timeout", s.HeaderTimeout, "how long a client may take to send a request's headers")
	fs.DurationVar(&s.IdleTimeout, "http-idle-timeout", s.IdleTimeout, "how long an idle keep-alive connection stays open")
	fs.StringVar(&s.Cluster.Name, "cluster-name", s.Cluster.Name, "make this hostd a host of the fleet of that name, its records in the fleet's embedded etcd (docs/FLEET.md); empty: a single host")
	fs.StringVar(&s.Cluster.Host, "cluster-host", s.Cluster.Host, "this host's name in --cluster-peers (default: the machine's host name)")
	fs.StringVar(&s.Cluster.Peers, "cluster-peers", s.Cluster.Peers, "every host of the fleet, this one too: NAME=ADDRESS,... (3 or 5)")
	fs.IntVar(&s.Cluster.PeerPort, "cluster-peer-port", s.Cluster.PeerPort, "port of each host's etcd member for its peers")
	fs.IntVar(&s.Cluster.ClientPort, "cluster-client-port", s.Cluster.ClientPort, "port of each host's etcd member for clients")
	fs.StringVar(&s.Cluster.Certs, "cluster-certs", s.Cluster.Certs, "directory of the fleet's certificates, from hostd cluster certs (TLS between hosts is required)")
	fs.IntVar(&s.Cluster.APIPort, "cluster-api-port", s.Cluster.APIPort, "port of the API the fleet's hosts call each other on (mutual TLS with --cluster-certs), on --listen's address; 0: any free port")
	fs.BoolVar(&s.Cluster.Join, "cluster-join", s.Cluster.Join, "start this host's etcd member into the running fleet, told of it first with hostd cluster member add (its --cluster-peers: every member, this one too)")
	fs.DurationVar(&s.Cluster.Lease, "cluster-lease", s.Cluster.Lease, "how long a host that stopped answering stays listed in the fleet")
	fs.StringVar(&s.Cluster.Endpoints, "etcd-endpoints", s.Cluster.Endpoints, "an existing etcd for the fleet instead of an embedded member: its client URLs, comma-separated (with --cluster-name)")
	fs.StringVar(&s.Cluster.EtcdCA, "etcd-ca", s.Cluster.EtcdCA, "CA of the existing etcd's certificates (https --etcd-endpoints)")
	fs.StringVar(&s.Cluster.EtcdCert, "etcd-cert", s.Cluster.EtcdCert, "client certificate for the existing etcd")
	fs.StringVar(&s.Cluster.EtcdKey, "etcd-key", s.Cluster.EtcdKey, "client key for the existing etcd")
	fs.StringVar(&s.Cluster.Advertise, "cluster-advertise", s.Cluster.Advertise, "API address other hosts reach this one at (default: its --cluster-peers address, --listen's port)")
	fs.BoolVar(&s.HibernateOnStop, "hibernate-on-stop", s.HibernateOnStop, "hibernate running desktops on SIGTERM instead of leaving them running")
	fs.DurationVar(&s.ShutdownGrace, "shutdown-grace", s.ShutdownGrace, "how long in-flight requests may take to finish on SIGTERM")
	fs.BoolVar(&s.NoSandbox, "no-sandbox", s.NoSandbox, "turn QEMU's seccomp sandbox off (debugging only)")
	fs.StringVar(&s.QEMUUIDs, "qemu-uids", s.QEMUUIDs, "user ids desktops' QEMU processes run as, one each, FIRST-LAST (default 900000000-900065535 under the qemu driver, 900065536-900131071 under libvirt); off: as hostd's user, or libvirt's")
	fs.BoolVar(&s.NoCgroups, "no-cgroups", s.NoCgroups, "keep desktops' QEMU processes in hostd's cgroup (libvirtd's, under --driver libvirt) instead of a cgroup each")
	fs.Func("e2b-template", "E2B template id and the snapshot it creates from, ID=SNAPSHOT; repeat for more (a template not mapped is taken as a snapshot name)", func(v string) error {
		id, snap, ok := strings.Cut(v, "=")
		if !ok || id == "" || snap == "" {
			return fmt.Errorf("%q: write ID=SNAPSHOT, like base=minimal", v)
		}
		if s.E2BTemplates == nil {
			s.E2BTemplates = map[string]string{}
		}
		s.E2BTemplates[id] = snap
		return nil
	})
	fs.BoolVar(&s.E2BGuestOnly, "e2b-guest-only", s.E2BGuestOnly, "run every E2B command in the guest: no fast paths for the SDK's scrot and xdotool commands (docs/E2B.md)")
	fs.StringVar(&s.E2BDomain, "e2b-domain", s.E2BDomain, "domain E2B sandboxes report: the SDK builds https://PORT-ID.DOMAIN from it (docs/E2B.md)")
}

// Check says which of the daemon's limits is out of range, and what to
// give instead.
func (s Serve) Check() error {
	for _, c := range []struct {
		flag string
		bad  bool
		want string
	}{
		{"max-viewers-per-desktop", s.MaxViewersPerDesktop < 1, "at least 1"},
		{"max-viewers-per-token", s.MaxViewersPerToken < 1 || s.MaxViewersPerToken > s.MaxViewersPerDesktop, "from 1 up to --max-viewers-per-desktop"},
		{"max-cpu-pressure", s.Limits.MaxCPUPressure < 0 || s.Limits.MaxCPUPressure >= 1, "0 (off) or a share below 1, such as 0.9"},
		{"max-cpu-queue", s.Limits.MaxCPUQueue < 1, "at least 1"},
		{"cpu-queue-wait", s.Limits.CPUQueueWait <= 0, "a positive duration, such as 1m"},
		{"screenshot-encodes", s.ScreenshotEncodes < 0, "0 (the default: max(2, CPUs)) or more"},
		{"http-header-timeout", s.HeaderTimeout <= 0, "a positive duration, such as 10s"},
		{"http-idle-timeout", s.IdleTimeout <= 0, "a positive duration, such as 2m"},
		{"cluster-certs", s.Cluster.Name != "" && s.Cluster.Certs == "", "the directory hostd cluster certs wrote: the fleet's hosts talk over TLS only"},
		{"cluster-api-port", s.Cluster.APIPort < 0 || s.Cluster.APIPort > 65535, "a port, or 0 for any free one"},
		{"etcd-endpoints", s.Cluster.Endpoints != "" && s.Cluster.Name == "", "them with --cluster-name: they hold a fleet's records"},
		{"etcd-cert", (s.Cluster.EtcdCA == "") != (s.Cluster.EtcdCert == "") || (s.Cluster.EtcdCert == "") != (s.Cluster.EtcdKey == ""), "--etcd-ca, --etcd-cert and --etcd-key together, or none"},
		{"cluster-lease", s.Cluster.Name != "" && s.Cluster.Lease < 2*time.Second, "2s or more"},
	} {
		if c.bad {
			return fmt.Errorf("--%s is out of range: give %s", c.flag, c.want)
		}
	}
	return nil
}

// ParseSize reads a size such as 1GiB, 512MiB, 2G or 1024 (MiB) into MiB.
func ParseSize(s string) (int, error) {
	units := []struct {
		suffix string
		mib    int
	}{{"GiB", 1024}, {"MiB", 1}, {"G", 1024}, {"M", 1}, {"g", 1024}, {"m", 1}}
	for _, u := range units {
		if n, ok := cutSuffix(s, u.suffix); ok {
			v, err := strconv.Atoi(n)
			if err != nil || v <= 0 {
				return 0, &sizeError{s}
			}
			return v * u.mib, nil
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		return 0, &sizeError{s}
	}
	return v, nil
}

func cutSuffix(s, suffix string) (string, bool) {
	if len(s) > len(suffix) && s[len(s)-len(suffix):] == suffix {
		return s[:len(s)-len(suffix)], true
	}
	return "", false
}

type sizeError struct{ s string }

func (e *sizeError) Error() string {
	return "size " + strconv.Quote(e.s) + ": use a whole number with GiB or MiB, such as 1GiB or 512MiB"
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// QEMUUIDRange reads --qemu-uids: a range, off (unconfined), or empty (the
// driver's default range).
func (s Serve) QEMUUIDRange() (confine.IDRange, bool, error) {
	switch s.QEMUUIDs {
	case "":
		return confine.IDRange{}, false, nil
	case "off":
		return confine.IDRange{}, true, nil
	}
	r, err := confine.ParseIDRange(s.QEMUUIDs)
	if err != nil {
		return confine.IDRange{}, false, fmt.Errorf("--qemu-uids: %w", err)
	}
	return r, false, nil
}
