// Package fleet is the start of warmdesk's fleet of hosts on etcd (the
// issue "A fleet of hosts on etcd"): an embedded etcd member per host
// (member.go), with TLS between peers and clients from a cluster CA
// (certs.go); hostd's records kept in etcd, held to the same tests as the
// single-host bbolt store (records.go); and each host's leased membership
// key (hosts.go).
//
// Not built yet, and not reachable from `hostd serve`: placement, the
// proxy to the host that runs a desktop, snapshot pulls, host loss and
// `hostd fleet status`. docs/FLEET.md says where each stands.
package fleet
