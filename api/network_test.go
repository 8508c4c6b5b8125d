package api_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/netpolicy"
)

// The wire type carries the domain's policy: the same JSON both ways, and
// the same bodies accepted and refused.
func TestNetworkPolicyIsNetpolicysJSON(t *testing.T) {
	domain := netpolicy.Policy{Mode: netpolicy.Allow, Allow: []string{"*.example.com:443", "203.0.113.0/24:443", "[2001:db8::/32]:443", "host:3000"}}
	wire := api.NetworkPolicy{Mode: string(domain.Mode), Allow: domain.Allow}

	fromDomain, err := json.Marshal(domain)
	if err != nil {
		t.Fatal(err)
	}
	fromWire, err := json.Marshal(wire)
	if err != nil {
		t.Fatal(err)
	}
	if string(fromWire) != string(fromDomain) {
		t.Fatalf("api.NetworkPolicy encodes as %s, netpolicy.Policy as %s", fromWire, fromDomain)
	}

	var gotWire api.NetworkPolicy
	if err := json.Unmarshal(fromDomain, &gotWire); err != nil || !reflect.DeepEqual(gotWire, wire) {
		t.Errorf("netpolicy's JSON decodes into the wire type as %+v, %v; want %+v", gotWire, err, wire)
	}
	var gotDomain netpolicy.Policy
	if err := json.Unmarshal(fromWire, &gotDomain); err != nil || !reflect.DeepEqual(gotDomain, domain) {
		t.Errorf("the wire type's JSON decodes into netpolicy.Policy as %+v, %v; want %+v", gotDomain, err, domain)
	}
}

func TestNetworkPolicyDecodesAsNetpolicyDoes(t *testing.T) {
	for _, body := range []string{
		`true`, `false`, `null`, ` true `, `{}`, `{"mode": "open"}`, `{"mode": "none", "allow": []}`,
		`{"mode": "allow", "allow": ["host:3000"]}`,
		`{"mode": "allow", "allow": ["x"], "extra": 1}`, `{"mode": 5}`, `{"allow": [1]}`, `"open"`, `[]`, `{"mode": "open"} x`,
	} {
		var domain netpolicy.Policy
		derr := json.Unmarshal([]byte(body), &domain)
		var wire api.NetworkPolicy
		werr := json.Unmarshal([]byte(body), &wire)
		if (derr == nil) != (werr == nil) {
			t.Errorf("%s: netpolicy.Policy says %v, api.NetworkPolicy %v", body, derr, werr)
			continue
		}
		if derr == nil && (wire.Mode != string(domain.Mode) || !reflect.DeepEqual(wire.Allow, domain.Allow)) {
			t.Errorf("%s: decoded as %+v, netpolicy.Policy as %+v", body, wire, domain)
		}
	}
}
