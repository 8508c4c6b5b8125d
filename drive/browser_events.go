package drive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/browsertool"
)

// What the browser toolset keeps from DevTools events beside the tabs:
// downloads (reported as browser_state changes on the next successful
// result) and each tab's requests (read_network).

// DownloadDir is where a browser desktop's Chromium saves downloads: the
// home of the user it runs as (root) in the browser image.
const DownloadDir = "/root/Downloads"

// Caps on what is kept between reads, so a page that never stops loading
// cannot grow hostd: the newest are kept.
const (
	maxNetworkLines   = 1000
	maxPendingChanges = browsertool.MaxStateChanges
)

// download is one download Chromium announced.
type download struct {
	url, name string
}

// request is one request a tab made, filled in by its events.
type request struct {
	id, method, url string
	started         float64 // DevTools' monotonic seconds
	status          int
	mime            string
	took            time.Duration
	failed          string
	done            bool
}

// line renders a request for read_network: method, URL, status (or why it
// failed, or "pending"), MIME type, time.
func (r *request) line() string {
	switch {
	case r.failed != "":
		return fmt.Sprintf("%s %s failed: %s", r.method, r.url, r.failed)
	case !r.done:
		return fmt.Sprintf("%s %s pending", r.method, r.url)
	}
	line := fmt.Sprintf("%s %s %d", r.method, r.url, r.status)
	if r.mime != "" {
		line += " " + r.mime
	}
	return line + fmt.Sprintf(" %d ms", r.took.Milliseconds())
}

// enableDownloads has Chromium save downloads to DownloadDir without
// asking, and report them as events.
func (b *browserLink) enableDownloads(ctx context.Context) error {
	return b.cdp.Call(ctx, "", "Browser.setDownloadBehavior", map[string]any{
		"behavior": "allow", "downloadPath": DownloadDir, "eventsEnabled": true,
	}, nil)
}

// downloadEvent records a download's start or progress; b.mu is held.
func (b *browserLink) downloadEvent(method string, params json.RawMessage) {
	var p struct {
		GUID     string  `json:"guid"`
		URL      string  `json:"url"`
		Name     string  `json:"suggestedFilename"`
		State    string  `json:"state"`
		Received float64 `json:"receivedBytes"`
		FilePath string  `json:"filePath"`
	}
	if json.Unmarshal(params, &p) != nil || p.GUID == "" {
		return
	}
	if b.downloads == nil {
		b.downloads = map[string]*download{}
	}
	if method == "Browser.downloadWillBegin" {
		b.downloads[p.GUID] = &download{url: p.URL, name: p.Name}
		b.change(browsertool.StateChange{Type: "download_started", DownloadID: p.GUID, URL: clip(p.URL)})
		return
	}
	d := b.downloads[p.GUID]
	if d == nil {
		return // begun before this connection
	}
	switch p.State {
	case "completed":
		saved := p.FilePath // newer Chromium says where it saved
		if saved == "" {
			saved = path.Join(DownloadDir, d.name)
		}
		size := int64(p.Received)
		b.change(browsertool.StateChange{Type: "download_completed", DownloadID: p.GUID, URL: clip(d.url), Path: clip(saved), SizeBytes: &size})
		delete(b.downloads, p.GUID)
	case "canceled":
		b.change(browsertool.StateChange{Type: "download_failed", DownloadID: p.GUID, URL: clip(d.url), Error: "canceled"})
		delete(b.downloads, p.GUID)
	}
}

// change queues a download's change for the next successful result,
// replacing one of the same download not yet reported (a block holds at
// most one per download); b.mu is held.
func (b *browserLink) change(c browsertool.StateChange) {
	b.pending = slices.DeleteFunc(b.pending, func(p browsertool.StateChange) bool { return p.DownloadID == c.DownloadID })
	b.pending = append(b.pending, c)
	if n := len(b.pending); n > maxPendingChanges {
		b.pending = b.pending[n-maxPendingChanges:]
	}
}

// networkEvent records a tab's request events; b.mu is held.
func (b *browserLink) networkEvent(tab *browserTab, method string, params json.RawMessage) {
	var p struct {
		RequestID string  `json:"requestId"`
		Timestamp float64 `json:"timestamp"`
		Request   struct {
			Method string `json:"method"`
			URL    string `json:"url"`
		} `json:"request"`
		Response         cdpResponse  `json:"response"`
		RedirectResponse *cdpResponse `json:"redirectResponse"`
		ErrorText        string       `json:"errorText"`
	}
	if json.Unmarshal(params, &p) != nil || p.RequestID == "" {
		return
	}
	if method == "Network.requestWillBeSent" {
		// A redirect sends the same id again: the hop before it ended
		// with the redirect's response.
		if r := tab.request(p.RequestID); r != nil && !r.done && p.RedirectResponse != nil {
			r.status, r.mime = p.RedirectResponse.Status, p.RedirectResponse.MimeType
			r.done, r.took = true, since(r.started, p.Timestamp)
		}
		tab.network = append(tab.network, &request{id: p.RequestID, method: p.Request.Method, url: p.Request.URL, started: p.Timestamp})
		if n := len(tab.network); n > maxNetworkLines {
			tab.network = tab.network[n-maxNetworkLines:]
		}
		return
	}
	r := tab.request(p.RequestID)
	if r == nil {
		return
	}
	switch method {
	case "Network.responseReceived":
		r.status, r.mime = p.Response.Status, p.Response.MimeType
	case "Network.loadingFinished":
		r.done, r.took = true, since(r.started, p.Timestamp)
	case "Network.loadingFailed":
		r.done, r.failed = true, p.ErrorText
	}
}

type cdpResponse struct {
	Status   int    `json:"status"`
	MimeType string `json:"mimeType"`
}

// request is the tab's newest request of that id.
func (t *browserTab) request(id string) *request {
	for i := len(t.network) - 1; i >= 0; i-- {
		if t.network[i].id == id {
			return t.network[i]
		}
	}
	return nil
}

// since is the time between two DevTools timestamps (seconds).
func since(from, to float64) time.Duration { return time.Duration((to - from) * float64(time.Second)) }

// readNetwork answers read_network: the tab's requests since the toolset
// attached to it or since the last read, one per line; the ones still
// pending stay for the next read.
func (b *browserLink) readNetwork(tab *browserTab) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var lines []string
	var pending []*request
	for _, r := range tab.network {
		lines = append(lines, r.line())
		if !r.done {
			pending = append(pending, r)
		}
	}
	tab.network = pending
	return strings.Join(lines, "\n")
}

// fileUpload sets the files of the <input type=file> a ref names: paths
// in the desktop, each checked to be a file there first.
func (x *browserExec) fileUpload(ctx context.Context, tab *browserTab, c browsertool.Call) (browsertool.Outcome, error) {
	if len(c.DocumentIDs) > 0 {
		return browsertool.Outcome{}, errors.New("document_ids are not supported here (no files are staged outside the desktop): put the file into the desktop (PUT /v1/desktops/ID/files?path=...) and pass its path in paths")
	}
	if !c.Target.IsRef() {
		return browsertool.Outcome{}, errors.New("file_upload needs a ref target (the file input's ref from read_page or find)")
	}
	for _, p := range c.Paths {
		f, err := x.s.ReadFile(ctx, x.id, p)
		if err != nil {
			return browsertool.Outcome{}, fmt.Errorf("%s: %w (put the file into the desktop first: PUT /v1/desktops/ID/files?path=...)", p, err)
		}
		f.Close()
	}
	node, err := x.node(tab, c.Target.Ref)
	if err != nil {
		return browsertool.Outcome{}, err
	}
	if err := x.b.cdp.Call(ctx, tab.session, "DOM.setFileInputFiles", map[string]any{"files": c.Paths, "backendNodeId": node}, nil); err != nil {
		return browsertool.Outcome{}, fmt.Errorf("%s is not a file input, or has gone: %w", c.Target.Ref, err)
	}
	return browsertool.Outcome{}, nil
}
