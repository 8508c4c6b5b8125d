package api

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// NetworkPolicy is a desktop's egress policy on the wire: {"mode":
// "none"|"allow"|"open", "allow": [entries]}, the shape hostd stores and
// sends its policies in (netpolicy.Policy). The wire type only carries a
// policy: hostd checks it, and says what is wrong with it.
type NetworkPolicy struct {
	// Mode is none (the default: nothing), allow (only what an entry
	// names) or open (anywhere public).
	Mode string `json:"mode"`
	// Allow lists the entries, as written: host names ("*.example.com:443"),
	// CIDRs or addresses ("203.0.113.0/24:443") and host services
	// ("host:3000").
	Allow []string `json:"allow,omitempty"`
}

// UnmarshalJSON reads a policy object, strictly, or the boolean older
// clients and records send: true is open, false none. It accepts what
// netpolicy.Policy accepts.
func (p *NetworkPolicy) UnmarshalJSON(b []byte) error {
	switch string(bytes.TrimSpace(b)) {
	case "true":
		*p = NetworkPolicy{Mode: "open"}
		return nil
	case "false", "null":
		*p = NetworkPolicy{Mode: "none"}
		return nil
	}
	type plain NetworkPolicy
	var q plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&q); err != nil {
		return fmt.Errorf("network: %w: give {\"mode\": \"none\"|\"allow\"|\"open\", \"allow\": [entries]}", err)
	}
	*p = NetworkPolicy(q)
	return nil
}
