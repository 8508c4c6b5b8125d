package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
	"github.com/warmdesk/warmdesk/web"
)

// members is a fleet's etcd as far as the routes can tell.
type members struct{ list []api.FleetMember }

func (m *members) Members(context.Context) ([]api.FleetMember, error) { return m.list, nil }

func (m *members) AddMember(_ context.Context, name, address string) ([]api.FleetMember, error) {
	if address == "" {
		return nil, fmt.Errorf("%w: no address", desktop.ErrInvalid)
	}
	m.list = append(m.list, api.FleetMember{Name: name, PeerURL: "https://" + address + ":2380"})
	return m.list, nil
}

func (m *members) RemoveMember(_ context.Context, name string) error {
	for i, x := range m.list {
		if x.Name == name {
			m.list = append(m.list[:i], m.list[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("%w: no member %s", desktop.ErrNotFound, name)
}

// The member routes list, add and remove through the fleet, answer the
// domain's errors, take the daemon token only, and say so on a single
// host.
func TestFleetMemberRoutes(t *testing.T) {
	f := drivetest.NewDesktop(t)
	svc := drive.New(context.Background(), drive.Config{Manager: f.Manager, Screens: f.Screens})
	m := &members{list: []api.FleetMember{{Name: "h1", PeerURL: "https://127.0.0.11:2380", Started: true}}}
	call := func(h http.Handler, method, path, body, token string) (int, string) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}
	h := web.New(web.Config{Manager: f.Manager, Drive: svc, Token: actToken, Members: m}).Handler()
	if code, body := call(h, "POST", "/v1/fleet/members", `{"name":"h4","address":"127.0.0.14"}`, actToken); code != http.StatusCreated || !strings.Contains(body, "h4") {
		t.Errorf("add: %d %s", code, body)
	}
	if code, body := call(h, "POST", "/v1/fleet/members", `{"name":"h5"}`, actToken); code != http.StatusBadRequest {
		t.Errorf("add without an address: %d %s, want 400", code, body)
	}
	if code, body := call(h, "GET", "/v1/fleet/members", "", actToken); code != http.StatusOK || !strings.Contains(body, `"name":"h1"`) || !strings.Contains(body, `"name":"h4"`) {
		t.Errorf("list: %d %s", code, body)
	}
	if code, body := call(h, "DELETE", "/v1/fleet/members/h4", "", actToken); code != http.StatusNoContent {
		t.Errorf("remove: %d %s", code, body)
	}
	if code, _ := call(h, "DELETE", "/v1/fleet/members/h4", "", actToken); code != http.StatusNotFound {
		t.Errorf("remove again: %d, want 404", code)
	}
	if code, _ := call(h, "GET", "/v1/fleet/members", "", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("list with a wrong token: %d, want 401", code)
	}
	single := web.New(web.Config{Manager: f.Manager, Drive: svc, Token: actToken}).Handler()
	if code, body := call(single, "GET", "/v1/fleet/members", "", actToken); code != http.StatusConflict || !strings.Contains(body, "not_a_fleet") {
		t.Errorf("a single host's members: %d %s, want 409 not_a_fleet", code, body)
	}
}
