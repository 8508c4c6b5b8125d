package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/api"
)

// Labels given at create come back on the desktop; bad ones are refused
// naming the field, and nothing is created.
func TestCreateKeepsLabels(t *testing.T) {
	h := newActHarness(t)
	code, body := h.do(http.MethodPost, "/v1/desktops", `{"snapshot":"snap","labels":{"team":"infra","run":"7"}}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	var d api.Desktop
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	if d.Labels["team"] != "infra" || d.Labels["run"] != "7" {
		t.Errorf("labels %v", d.Labels)
	}
	if code, body := h.do(http.MethodGet, "/v1/desktops/"+d.ID, ""); code != http.StatusOK || !strings.Contains(string(body), `"labels":{"run":"7","team":"infra"}`) {
		t.Errorf("get: %d %s", code, body)
	}
	code, body = h.do(http.MethodPost, "/v1/desktops", `{"snapshot":"snap","labels":{"":"x"}}`)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "labels") {
		t.Errorf("an empty label key: %d %s", code, body)
	}
	if n := len(h.mgr.List()); n != 2 {
		t.Errorf("%d desktops, want the harness's and the labelled one", n)
	}
}
