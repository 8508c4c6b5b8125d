// Package fleet is warmdesk's fleet of hosts on etcd (docs/FLEET.md).
// hostd serve --cluster-name starts one Node (node.go), its host's part
// in the fleet: an embedded etcd member (member.go) with TLS from a
// cluster CA (certs.go), or a client of an existing etcd (client.go);
// hostd's records in etcd, held to the same tests as the single-host
// bbolt store (records.go), fenced by each start's generation
// (generation.go); the shared daemon token and its rotation (token.go,
// node_token.go); the leased membership key that says what the host
// holds and how loaded it is (hosts.go, node_status.go); placement
// (place.go); and snapshot pulls from other hosts, checked against their
// manifest (pull.go, node_pull.go).
//
// fleet knows desktops as records and the Manager that holds them: it
// imports no driver and no HTTP front door. hostd wires the Node's
// methods into web's hooks (the proxy, the fleet's events, placement).
package fleet
