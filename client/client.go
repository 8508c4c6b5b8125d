// Package client is a Go client for hostd's HTTP API (v1), used by the
// hostd command line, the benchmark harness and the tests.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"github.com/warmdesk/warmdesk/api"
)

// Client talks to one hostd.
type Client struct {
	BaseURL string // e.g. http://127.0.0.1:8787
	Token   string
	HTTP    *http.Client
}

// New returns a client for a daemon at base with a bearer token.
func New(base, token string) *Client {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &Client{BaseURL: strings.TrimRight(base, "/"), Token: token, HTTP: &http.Client{}}
}

// Error is an error answer from the API.
type Error struct {
	Status int
	api.ErrorBody
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s (%d %s, field %s)", e.Message, e.Status, e.Code, e.Field)
	}
	return fmt.Sprintf("%s (%d %s)", e.Message, e.Status, e.Code)
}

// IsUnreachable reports whether err means no daemon answered.
func IsUnreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, syscall.ECONNREFUSED)
}

// Do sends one request; in (if not nil) is sent as JSON, the answer is
// decoded into out (if not nil).
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e api.Error
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(data, &e) != nil || e.Error.Message == "" {
			e.Error = api.ErrorBody{Code: "http", Message: strings.TrimSpace(string(data))}
		}
		return &Error{Status: resp.StatusCode, ErrorBody: e.Error}
	}
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	if b, ok := out.(*[]byte); ok {
		*b, err = io.ReadAll(resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// CreateDesktop creates a desktop.
func (c *Client) CreateDesktop(ctx context.Context, req api.CreateDesktop) (api.Desktop, error) {
	var d api.Desktop
	err := c.Do(ctx, http.MethodPost, "/v1/desktops", req, &d)
	return d, err
}

// Desktops lists desktops.
func (c *Client) Desktops(ctx context.Context) ([]api.Desktop, error) {
	var l api.DesktopList
	err := c.Do(ctx, http.MethodGet, "/v1/desktops", nil, &l)
	return l.Desktops, err
}

// Desktop gets one desktop.
func (c *Client) Desktop(ctx context.Context, id string) (api.Desktop, error) {
	var d api.Desktop
	err := c.Do(ctx, http.MethodGet, "/v1/desktops/"+url.PathEscape(id), nil, &d)
	return d, err
}

// DeleteDesktop deletes a desktop.
func (c *Client) DeleteDesktop(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/desktops/"+url.PathEscape(id), nil, nil)
}

// Op runs pause, resume, hibernate or wake.
func (c *Client) Op(ctx context.Context, id, op string) (api.Desktop, error) {
	var d api.Desktop
	err := c.Do(ctx, http.MethodPost, "/v1/desktops/"+url.PathEscape(id)+"/"+op, nil, &d)
	return d, err
}

// Reset returns a desktop to its snapshot, keeping its id, URLs and tokens.
func (c *Client) Reset(ctx context.Context, id string, req api.Reset) (api.Desktop, error) {
	var d api.Desktop
	err := c.Do(ctx, http.MethodPost, "/v1/desktops/"+url.PathEscape(id)+"/reset", req, &d)
	return d, err
}

// Fork makes n copies of a desktop.
func (c *Client) Fork(ctx context.Context, id string, n int) ([]api.Desktop, error) {
	var l api.DesktopList
	err := c.Do(ctx, http.MethodPost, "/v1/desktops/"+url.PathEscape(id)+"/fork", api.Fork{Count: n}, &l)
	return l.Desktops, err
}

// Snapshot turns a desktop into a new snapshot.
func (c *Client) Snapshot(ctx context.Context, id, name string) (api.Snapshot, error) {
	var s api.Snapshot
	err := c.Do(ctx, http.MethodPost, "/v1/desktops/"+url.PathEscape(id)+"/snapshot", api.TakeSnapshot{Name: name}, &s)
	return s, err
}

// Snapshots lists snapshots.
func (c *Client) Snapshots(ctx context.Context) ([]api.Snapshot, error) {
	var l api.SnapshotList
	err := c.Do(ctx, http.MethodGet, "/v1/snapshots", nil, &l)
	return l.Snapshots, err
}

// Images lists the host's built guest images, newest first.
func (c *Client) Images(ctx context.Context) ([]api.GuestImage, error) {
	var l api.ImageList
	err := c.Do(ctx, http.MethodGet, "/v1/images", nil, &l)
	return l.Images, err
}

// RemoveSnapshot removes a snapshot nothing uses.
func (c *Client) RemoveSnapshot(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/snapshots/"+url.PathEscape(name), nil, nil)
}

// Screenshot fetches a picture; query holds screenshot options (format,
// width, ...). settled waits for the screen to stop changing first.
func (c *Client) Screenshot(ctx context.Context, id string, query url.Values, settled bool) ([]byte, http.Header, error) {
	path := "/v1/desktops/" + url.PathEscape(id) + "/screenshot"
	if settled {
		path += "/settled"
	}
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e api.Error
		json.Unmarshal(data, &e)
		return nil, nil, &Error{Status: resp.StatusCode, ErrorBody: e.Error}
	}
	return data, resp.Header, nil
}

// RotateToken replaces the daemon's token; the client keeps using the old
// one, which the daemon now refuses: make a new client with the answer.
func (c *Client) RotateToken(ctx context.Context) (string, error) {
	var out api.RotatedToken
	if err := c.Do(ctx, http.MethodPost, "/v1/token/rotate", nil, &out); err != nil {
		return "", err
	}
	return out.Token, nil
}

// DevToolsURL mints a short-lived DevTools root for the desktop's
// Chromium, with its token in the path, for tools that cannot send an
// Authorization header (Playwright's connectOverCDP takes EndpointURL,
// Puppeteer and chromedp the WebSocket).
func (c *Client) DevToolsURL(ctx context.Context, id string) (api.DevToolsURL, error) {
	var out api.DevToolsURL
	err := c.Do(ctx, http.MethodPost, "/v1/desktops/"+url.PathEscape(id)+"/cdp/url", nil, &out)
	return out, err
}

// Host says what the host admits now: desktops, memory, CPU pressure and
// its admission queue.
func (c *Client) Host(ctx context.Context) (api.Host, error) {
	var h api.Host
	err := c.Do(ctx, http.MethodGet, "/v1/host", nil, &h)
	return h, err
}

// Fleet lists the fleet the host belongs to; a single host answers 409
// not_a_fleet.
func (c *Client) Fleet(ctx context.Context) (api.Fleet, error) {
	var f api.Fleet
	err := c.Do(ctx, http.MethodGet, "/v1/fleet", nil, &f)
	return f, err
}

// FleetMembers lists the fleet's embedded etcd members.
func (c *Client) FleetMembers(ctx context.Context) ([]api.FleetMember, error) {
	var out []api.FleetMember
	err := c.Do(ctx, http.MethodGet, "/v1/fleet/members", nil, &out)
	return out, err
}

// AddFleetMember tells the fleet's etcd of a host about to start with
// --cluster-join, and returns every member (that host's --cluster-peers).
func (c *Client) AddFleetMember(ctx context.Context, req api.AddFleetMember) ([]api.FleetMember, error) {
	var out []api.FleetMember
	err := c.Do(ctx, http.MethodPost, "/v1/fleet/members", req, &out)
	return out, err
}

// RemoveFleetMember takes a member out of the fleet's etcd.
func (c *Client) RemoveFleetMember(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/fleet/members/"+url.PathEscape(name), nil, nil)
}

// Drain stops (on) or restarts placing new desktops on a fleet host, and
// returns the fleet as it is then.
func (c *Client) Drain(ctx context.Context, host string, on bool) (api.Fleet, error) {
	method := http.MethodPost
	if !on {
		method = http.MethodDelete
	}
	var f api.Fleet
	err := c.Do(ctx, method, "/v1/fleet/hosts/"+url.PathEscape(host)+"/drain", nil, &f)
	return f, err
}

// MoveDesktop moves a running desktop of a fleet to host to, or to the
// host the fleet chooses when to is empty, and says how the move went.
func (c *Client) MoveDesktop(ctx context.Context, id, to string) (api.Move, error) {
	var m api.Move
	err := c.Do(ctx, http.MethodPost, "/v1/desktops/"+url.PathEscape(id)+"/move", api.MoveDesktop{To: to}, &m)
	return m, err
}
