package e2b

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// Sandbox timeouts, as E2B has them: 300 s unless asked, at most a day.
const (
	defaultTimeout = 300 * time.Second
	maxTimeout     = 24 * time.Hour
	maxAPIBody     = 1 << 20
)

// newSandbox is the create body (both generations).
type newSandbox struct {
	TemplateID string            `json:"templateID"`
	Timeout    *int              `json:"timeout"`
	Metadata   map[string]string `json:"metadata"`
	EnvVars    map[string]string `json:"envVars"`
	// AllowInternetAccess false keeps warmdesk's default: no network.
	AllowInternetAccess *bool `json:"allow_internet_access"`
	AutoPause           bool  `json:"autoPause"`
	Secure              *bool `json:"secure"`
}

// sandboxJSON answers create and connect.
type sandboxJSON struct {
	SandboxID       string  `json:"sandboxID"`
	ClientID        string  `json:"clientID"`
	TemplateID      string  `json:"templateID"`
	Alias           string  `json:"alias,omitempty"`
	EnvdVersion     string  `json:"envdVersion"`
	EnvdAccessToken string  `json:"envdAccessToken"`
	Domain          *string `json:"domain"`
}

// sandboxInfo answers get and list.
type sandboxInfo struct {
	SandboxID   string            `json:"sandboxID"`
	TemplateID  string            `json:"templateID"`
	Alias       string            `json:"alias,omitempty"`
	ClientID    string            `json:"clientID"`
	Metadata    map[string]string `json:"metadata"`
	StartedAt   time.Time         `json:"startedAt"`
	EndAt       time.Time         `json:"endAt"`
	State       string            `json:"state"`
	CPUCount    int               `json:"cpuCount"`
	MemoryMB    int               `json:"memoryMB"`
	DiskSizeMB  int               `json:"diskSizeMB"`
	EnvdVersion string            `json:"envdVersion"`
}

// clientID is what E2B calls the host a sandbox runs on.
const clientID = "warmdesk"

// decodeBody reads a small JSON body; an empty one is {}.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAPIBody))
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		apiError(w, http.StatusRequestEntityTooLarge, "request body over the limit of %d bytes", mb.Limit)
		return false
	}
	if err != nil {
		apiError(w, http.StatusBadRequest, "request body: %v", err)
		return false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return true
	}
	if err := json.Unmarshal(body, v); err != nil {
		apiError(w, http.StatusBadRequest, "malformed JSON body: %v", err)
		return false
	}
	return true
}

// timeoutOfBody checks a timeout in seconds.
func timeoutOfBody(secs *int, fallback time.Duration) (time.Duration, error) {
	if secs == nil {
		return fallback, nil
	}
	d := time.Duration(*secs) * time.Second
	if *secs <= 0 || d > maxTimeout {
		return 0, fmt.Errorf("timeout %d: give 1 to %d seconds", *secs, int(maxTimeout.Seconds()))
	}
	return d, nil
}

// SnapshotOf maps a template id to a snapshot's name (a fleet places an
// E2B create by it).
func (s *Server) SnapshotOf(template string) string {
	if template == "" {
		template = "base"
	}
	if snap, ok := s.cfg.Templates[template]; ok {
		return snap
	}
	return template
}

// aliasOf is the template id a snapshot is known by, when one maps to it.
func (s *Server) aliasOf(snapshot string) string {
	keys := make([]string, 0, len(s.cfg.Templates))
	for k, v := range s.cfg.Templates {
		if v == snapshot {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if len(keys) > 0 {
		return keys[0]
	}
	return ""
}

func (s *Server) sandboxOf(d desktop.Desktop) sandboxJSON {
	sb := sandboxJSON{SandboxID: d.ID, ClientID: clientID, TemplateID: d.Snapshot, Alias: s.aliasOf(d.Snapshot),
		EnvdVersion: EnvdVersion, EnvdAccessToken: AccessToken(s.cfg.DaemonToken(), d.ID)}
	if s.cfg.Domain != "" {
		sb.Domain = &s.cfg.Domain
	}
	return sb
}

// stateOf is E2B's name for a desktop's state.
func stateOf(st desktop.State) string {
	switch st {
	case desktop.StatePaused, desktop.StateHibernated:
		return "paused"
	case desktop.StateRunning, desktop.StateCreating:
		return "running"
	}
	return string(st)
}

func (s *Server) infoOf(d desktop.Desktop) sandboxInfo {
	end := d.CreatedAt.Add(maxTimeout * 365)
	if d.ExpiresAt != nil {
		end = *d.ExpiresAt
	}
	md := d.Labels
	if md == nil {
		md = map[string]string{}
	}
	return sandboxInfo{SandboxID: d.ID, TemplateID: d.Snapshot, Alias: s.aliasOf(d.Snapshot), ClientID: clientID,
		Metadata: md, StartedAt: d.CreatedAt, EndAt: end, State: stateOf(d.State),
		CPUCount: d.Resources.CPUs, MemoryMB: d.Resources.MemoryMiB, DiskSizeMB: d.Resources.DiskMiB, EnvdVersion: EnvdVersion}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// createSandbox restores a desktop from the template's snapshot; it
// answers once the guest serves commands, since the SDK calls envd next.
func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req newSandbox
	if !decodeBody(w, r, &req) {
		return
	}
	ttl, err := timeoutOfBody(req.Timeout, defaultTimeout)
	if err != nil {
		apiError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if req.AutoPause {
		apiError(w, http.StatusBadRequest, "autoPause is not supported: a warmdesk sandbox is killed at its timeout (pause it yourself before)")
		return
	}
	if req.AllowInternetAccess != nil && *req.AllowInternetAccess {
		apiError(w, http.StatusBadRequest, "allow_internet_access: warmdesk sandboxes start with no network; set a policy with hostd's own API (PUT /v1/desktops/ID/network, docs/NETWORK.md)")
		return
	}
	snap := s.SnapshotOf(req.TemplateID)
	d, err := s.cfg.Desktops.Create(r.Context(), desktop.CreateRequest{Snapshot: snap, TTL: ttl, Labels: req.Metadata, Env: req.EnvVars})
	if err != nil {
		status := statusOf(err)
		if status == http.StatusNotFound {
			apiError(w, status, "template %q: no snapshot %q on this host (hostd snapshot list; hostd serve --e2b-template ID=SNAPSHOT maps ids)", req.TemplateID, snap)
			return
		}
		var busy *desktop.BusyError
		if errors.As(err, &busy) {
			w.Header().Set("Retry-After", strconv.Itoa(busy.RetryAfterSeconds()))
		}
		apiError(w, status, "create sandbox from template %q: %v", req.TemplateID, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.sandboxOf(d))
}

// connectSandbox answers for a running sandbox and brings a paused one
// back; a timeout in the body resets its end.
func (s *Server) connectSandbox(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Timeout *int `json:"timeout"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	id := r.PathValue("id")
	d, err := s.cfg.Desktops.Get(id)
	if err != nil {
		apiError(w, http.StatusNotFound, "sandbox %s does not exist (killed or expired)", id)
		return
	}
	status := http.StatusOK
	switch d.State {
	case desktop.StateHibernated:
		d, err = s.cfg.Desktops.Wake(r.Context(), id)
		status = http.StatusCreated
	case desktop.StatePaused:
		d, err = s.cfg.Desktops.Resume(r.Context(), id)
		status = http.StatusCreated
	}
	if err != nil {
		apiError(w, statusOf(err), "resume sandbox %s: %v", id, err)
		return
	}
	if req.Timeout != nil {
		ttl, err := timeoutOfBody(req.Timeout, 0)
		if err != nil {
			apiError(w, http.StatusBadRequest, "%v", err)
			return
		}
		if d, err = s.cfg.Desktops.SetExpiry(id, time.Now().Add(ttl)); err != nil {
			apiError(w, statusOf(err), "sandbox %s: %v", id, err)
			return
		}
	}
	writeJSON(w, status, s.sandboxOf(d))
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	d, err := s.cfg.Desktops.Get(r.PathValue("id"))
	if err != nil {
		apiError(w, http.StatusNotFound, "sandbox %s does not exist (killed or expired)", r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, s.infoOf(d))
}

// killSandbox deletes the desktop; the SDK wants 204 and no body.
func (s *Server) killSandbox(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.Desktops.Delete(r.Context(), r.PathValue("id")); err != nil {
		apiError(w, statusOf(err), "kill sandbox %s: %v", r.PathValue("id"), err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Timeout *int `json:"timeout"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Timeout == nil {
		apiError(w, http.StatusBadRequest, "timeout is required: seconds from now until the sandbox is killed")
		return
	}
	ttl, err := timeoutOfBody(req.Timeout, 0)
	if err != nil {
		apiError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if _, err := s.cfg.Desktops.SetExpiry(r.PathValue("id"), time.Now().Add(ttl)); err != nil {
		apiError(w, statusOf(err), "sandbox %s: %v", r.PathValue("id"), err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// pauseSandbox hibernates the desktop: its memory goes to disk and a
// connect wakes it where it was. Already paused is 409, as E2B has it.
func (s *Server) pauseSandbox(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	d, err := s.cfg.Desktops.Get(id)
	if err != nil {
		apiError(w, http.StatusNotFound, "sandbox %s does not exist (killed or expired)", id)
		return
	}
	if stateOf(d.State) == "paused" {
		apiError(w, http.StatusConflict, "sandbox %s is already paused", id)
		return
	}
	if _, err := s.cfg.Desktops.Hibernate(r.Context(), id); err != nil {
		apiError(w, statusOf(err), "pause sandbox %s: %v", id, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// listQuery is a list's filter and page.
type listQuery struct {
	metadata map[string]string
	states   []string
	template string
	after    time.Time
	limit    int
	next     string
}

const maxListLimit = 1000

// parseListQuery reads E2B's list query: metadata is itself a query
// string whose keys and values the SDK escaped once more.
func parseListQuery(q url.Values) (listQuery, error) {
	lq := listQuery{limit: 100, template: q.Get("template"), next: q.Get("nextToken")}
	if md := q.Get("metadata"); md != "" {
		pairs, err := url.ParseQuery(md)
		if err != nil {
			return lq, fmt.Errorf("metadata %q: %w", md, err)
		}
		lq.metadata = map[string]string{}
		for k, vs := range pairs {
			key, err1 := url.QueryUnescape(k)
			val, err2 := url.QueryUnescape(vs[0])
			if err1 != nil || err2 != nil {
				return lq, fmt.Errorf("metadata %q: badly escaped", md)
			}
			lq.metadata[key] = val
		}
	}
	for _, st := range strings.Split(q.Get("state"), ",") {
		switch st {
		case "":
		case "running", "paused":
			lq.states = append(lq.states, st)
		default:
			return lq, fmt.Errorf("state %q: running or paused", st)
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			return lq, fmt.Errorf("limit %q: 1 to %d", v, maxListLimit)
		}
		lq.limit = n
	}
	if v := q.Get("startedAfter"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return lq, fmt.Errorf("startedAfter %q: an RFC 3339 time", v)
		}
		lq.after = t
	}
	return lq, nil
}

func (lq listQuery) match(d desktop.Desktop, alias string) bool {
	if len(lq.states) > 0 && !slices.Contains(lq.states, stateOf(d.State)) {
		return false
	}
	if lq.template != "" && lq.template != d.Snapshot && lq.template != alias {
		return false
	}
	if !lq.after.IsZero() && !d.CreatedAt.After(lq.after) {
		return false
	}
	for k, v := range lq.metadata {
		if d.Labels[k] != v {
			return false
		}
	}
	return true
}

// listSandboxes pages through the host's desktops, oldest first. The
// next page's token is the last listed desktop's creation time and id:
// the page after it starts past that place, even if it was deleted.
func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	lq, err := parseListQuery(r.URL.Query())
	if err != nil {
		apiError(w, http.StatusBadRequest, "list sandboxes: %v", err)
		return
	}
	after, err := parsePageToken(lq.next)
	if err != nil {
		apiError(w, http.StatusBadRequest, "list sandboxes: %v", err)
		return
	}
	all := s.cfg.Desktops.List()
	if s.cfg.Others != nil {
		others, err := s.cfg.Others(r.Context())
		if err != nil {
			apiError(w, statusOf(err), "list the sandboxes of the fleet's other hosts: %v", err)
			return
		}
		all = append(all, others...)
	}
	slices.SortFunc(all, func(a, b desktop.Desktop) int {
		return comparePlace(pageToken{a.CreatedAt, a.ID}, pageToken{b.CreatedAt, b.ID})
	})
	out := []sandboxInfo{}
	for _, d := range all {
		if d.State == desktop.StateStopping || d.State == desktop.StateDeleted || after != nil && comparePlace(pageToken{d.CreatedAt, d.ID}, *after) <= 0 {
			continue
		}
		if !lq.match(d, s.aliasOf(d.Snapshot)) {
			continue
		}
		if len(out) == lq.limit {
			last := out[len(out)-1]
			w.Header().Set("X-Next-Token", pageToken{last.StartedAt, last.SandboxID}.String())
			break
		}
		out = append(out, s.infoOf(d))
	}
	writeJSON(w, http.StatusOK, out)
}

// pageToken is a place in the list: a creation time and an id.
type pageToken struct {
	at time.Time
	id string
}

func (p pageToken) String() string { return strconv.FormatInt(p.at.UnixNano(), 10) + "_" + p.id }

func comparePlace(a, b pageToken) int {
	if c := a.at.Compare(b.at); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

// parsePageToken reads a nextToken; "" is the first page (nil).
func parsePageToken(v string) (*pageToken, error) {
	if v == "" {
		return nil, nil
	}
	ns, id, ok := strings.Cut(v, "_")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return nil, fmt.Errorf("nextToken %q: not a token this list gave", v)
	}
	return &pageToken{time.Unix(0, n), id}, nil
}
