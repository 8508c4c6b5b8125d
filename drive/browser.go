package drive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/browsertool"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/devtools"
)

// Anthropic's browser toolset runs on a browser desktop's Chromium over
// DevTools, through the same bridge a Playwright client uses: tabs are
// page targets, element refs are DOM nodes of a tab's accessibility tree,
// coordinates and pictures are the active tab's viewport, and pointer and
// keyboard members are DevTools input events on that tab (so they land in
// the page whatever sits over the window, and the desktop's own pointer
// does not move). A person holding the desktop's control refuses them, as
// every input.

// NavigationTimeout bounds navigate's wait for the page's load.
const NavigationTimeout = 30 * time.Second

// BrowserTurn runs a turn of browser toolset calls on a desktop's
// Chromium, in order, stopping at the first failure (browsertool.RunTurn).
// An error is the desktop's (not running, no Chromium): no call ran.
func (s *Service) BrowserTurn(ctx context.Context, id string, uses []browsertool.ToolUse, toolset browsertool.Toolset) (results []browsertool.ToolResult, failed int, err error) {
	defer s.mgr.Use(id)()
	if _, err := s.chromiumMachine(ctx, id); err != nil {
		return nil, -1, err
	}
	b := s.browserLinkOf(id)
	b.turn.Lock()
	defer b.turn.Unlock()
	if err := b.connect(ctx, func(ctx context.Context, _, _ string) (net.Conn, error) { return s.DialDevTools(ctx, id) }); err != nil {
		return nil, -1, fmt.Errorf("%w: desktop %s: its Chromium's DevTools: %w", desktop.ErrUnavailable, id, err)
	}
	results, failed = browsertool.RunTurn(ctx, uses, toolset, &browserExec{s: s, id: id, b: b})
	for i, r := range results {
		if failed >= 0 && i > failed {
			break // not executed
		}
		s.mgr.Events().Announce(id, desktop.EventAction, browserSummary(uses[i], r))
	}
	return results, failed, nil
}

// browserSummary is the action log's line for one browser call: the
// member, its input, and how it went.
func browserSummary(u browsertool.ToolUse, r browsertool.ToolResult) string {
	line := "agent: browser " + u.Name
	if in := strings.TrimSpace(string(u.Input)); in != "" && in != "{}" {
		if len(in) > 200 {
			in = in[:200] + "…"
		}
		line += " " + in
	}
	if r.IsError && len(r.Content) > 0 {
		line += " (failed: " + firstLine(r.Content[0].Text) + ")"
	}
	return line
}

// browserLink is a desktop's DevTools client for the browser toolset,
// and what the toolset keeps between calls: tab ids, refs, console lines.
type browserLink struct {
	turn sync.Mutex // one turn (and one connect) at a time
	cdp  *devtools.Client

	mu      sync.Mutex // the fields below, which events update
	tabs    []*browserTab
	nextTab int
	active  *browserTab
	opened  []string // tabs opened since the current call began
	waiters []eventWaiter
	dropped bool // the desktop is gone or reset: connect no more
	// downloads are the ones under way; pending, their changes not yet
	// on a successful result.
	downloads map[string]*download
	pending   []browsertool.StateChange
}

// browserTab is one page target.
type browserTab struct {
	id, target, session string
	title, url          string
	// refs and nodes map a DOM node to the ref it was given and back,
	// until the tab navigates; nextRef keeps counting across
	// navigations, so a ref from an earlier page is never reused.
	refs    map[int64]string
	nodes   map[string]int64
	nextRef int
	console []string
	network []*request
}

type eventWaiter struct {
	session, method string
	ch              chan json.RawMessage
}

// browserLinkOf returns the desktop's link, making an unconnected one.
func (s *Service) browserLinkOf(id string) *browserLink {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.browsers == nil {
		s.browsers = map[string]*browserLink{}
	}
	b := s.browsers[id]
	if b == nil {
		b = &browserLink{}
		s.browsers[id] = b
	}
	return b
}

// dropBrowser ends a desktop's link (deleted, or reset to a new guest):
// the next turn makes a new one.
func (s *Service) dropBrowser(id string) {
	s.mu.Lock()
	b := s.browsers[id]
	delete(s.browsers, id)
	s.mu.Unlock()
	if b == nil {
		return
	}
	b.mu.Lock()
	b.dropped = true
	cdp := b.cdp
	b.mu.Unlock()
	if cdp != nil {
		cdp.Close()
	}
}

// connect connects the link when it has no connection or its connection
// ended (a wake brings a new machine), starting over: tab ids and refs
// name the new connection's pages. b.turn is held.
func (b *browserLink) connect(ctx context.Context, dial devtools.DialFunc) error {
	b.mu.Lock()
	cdp, dropped := b.cdp, b.dropped
	b.mu.Unlock()
	if dropped {
		return errors.New("the desktop was reset or deleted during the call: try again")
	}
	if cdp != nil {
		select {
		case <-cdp.Done():
		default:
			return nil
		}
	}
	b.mu.Lock()
	b.tabs, b.active, b.opened, b.waiters = nil, nil, nil, nil
	b.downloads, b.pending = nil, nil
	b.mu.Unlock()
	cdp, err := devtools.Connect(ctx, dial, b.event)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.cdp = cdp
	b.mu.Unlock()
	if err := b.discover(ctx); err != nil {
		cdp.Close()
		return fmt.Errorf("list its tabs: %w", err)
	}
	if err := b.enableDownloads(ctx); err != nil {
		cdp.Close()
		return fmt.Errorf("have it report downloads: %w", err)
	}
	return nil
}

// discover lists the open pages as tabs, the first active, and asks for
// the events that keep the list current.
func (b *browserLink) discover(ctx context.Context) error {
	if err := b.cdp.Call(ctx, "", "Target.setDiscoverTargets", map[string]any{"discover": true}, nil); err != nil {
		return err
	}
	var targets struct {
		Infos []targetInfo `json:"targetInfos"`
	}
	if err := b.cdp.Call(ctx, "", "Target.getTargets", nil, &targets); err != nil {
		return err
	}
	b.mu.Lock()
	for _, t := range targets.Infos {
		b.addTarget(t)
	}
	b.opened = nil
	if b.active == nil && len(b.tabs) > 0 {
		b.active = b.tabs[0]
	}
	b.mu.Unlock()
	return nil
}

type targetInfo struct {
	ID       string `json:"targetId"`
	Type     string `json:"type"`
	Title    string `json:"title"`
	URL      string `json:"url"`
	OpenerID string `json:"openerId"`
}

// addTarget lists a page target as a tab once; b.mu is held.
func (b *browserLink) addTarget(t targetInfo) *browserTab {
	if t.Type != "page" {
		return nil
	}
	if tab := b.byTarget(t.ID); tab != nil {
		return tab
	}
	b.nextTab++
	tab := &browserTab{id: "tab-" + strconv.Itoa(b.nextTab), target: t.ID, title: t.Title, url: t.URL, refs: map[int64]string{}, nodes: map[string]int64{}}
	b.tabs = append(b.tabs, tab)
	b.opened = append(b.opened, tab.id)
	return tab
}

// byID is the open tab named id, or an error that says how to see what is
// open; b.mu is held.
func (b *browserLink) byID(id string) (*browserTab, error) {
	for _, t := range b.tabs {
		if t.id == id {
			return t, nil
		}
	}
	return nil, fmt.Errorf("tab %s is not open: use list_tabs to see what is open", id)
}

func (b *browserLink) byTarget(target string) *browserTab {
	for _, t := range b.tabs {
		if t.target == target {
			return t
		}
	}
	return nil
}

func (b *browserLink) bySession(session string) *browserTab {
	for _, t := range b.tabs {
		if t.session == session && session != "" {
			return t
		}
	}
	return nil
}

// event keeps the tabs current; it runs on the client's reading goroutine
// and never blocks.
func (b *browserLink) event(ev devtools.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev.Method {
	case "Target.targetCreated", "Target.targetInfoChanged":
		var p struct {
			Info targetInfo `json:"targetInfo"`
		}
		if json.Unmarshal(ev.Params, &p) != nil {
			return
		}
		tab := b.byTarget(p.Info.ID)
		if tab == nil {
			tab = b.addTarget(p.Info)
			// A page a page opened comes to the front.
			if tab != nil && p.Info.OpenerID != "" {
				b.active = tab
			}
		}
		if tab != nil {
			tab.title, tab.url = p.Info.Title, p.Info.URL
		}
	case "Target.targetDestroyed":
		var p struct {
			ID string `json:"targetId"`
		}
		if json.Unmarshal(ev.Params, &p) != nil {
			return
		}
		b.removeTarget(p.ID)
	case "Page.frameNavigated":
		var p struct {
			Frame struct {
				ParentID string `json:"parentId"`
				URL      string `json:"url"`
			} `json:"frame"`
		}
		if json.Unmarshal(ev.Params, &p) != nil || p.Frame.ParentID != "" {
			return
		}
		if tab := b.bySession(ev.Session); tab != nil {
			tab.refs, tab.nodes = map[int64]string{}, map[string]int64{}
			tab.url = p.Frame.URL
		}
	case "Browser.downloadWillBegin", "Browser.downloadProgress":
		b.downloadEvent(ev.Method, ev.Params)
	case "Network.requestWillBeSent", "Network.responseReceived", "Network.loadingFinished", "Network.loadingFailed":
		if tab := b.bySession(ev.Session); tab != nil {
			b.networkEvent(tab, ev.Method, ev.Params)
		}
	case "Runtime.consoleAPICalled":
		if tab := b.bySession(ev.Session); tab != nil {
			tab.console = append(tab.console, consoleLine(ev.Params))
			if len(tab.console) > 1000 {
				tab.console = tab.console[len(tab.console)-1000:]
			}
		}
	}
	for i := 0; i < len(b.waiters); i++ {
		w := b.waiters[i]
		if w.method == ev.Method && w.session == ev.Session {
			select {
			case w.ch <- ev.Params:
			default:
			}
			b.waiters = slices.Delete(b.waiters, i, i+1)
			i--
		}
	}
}

// removeTarget forgets a closed tab; b.mu is held. An active tab that
// closes gives the front to the last listed.
func (b *browserLink) removeTarget(target string) {
	i := slices.IndexFunc(b.tabs, func(t *browserTab) bool { return t.target == target })
	if i < 0 {
		return
	}
	gone := b.tabs[i]
	b.tabs = slices.Delete(b.tabs, i, i+1)
	if b.active == gone {
		b.active = nil
		if n := len(b.tabs); n > 0 {
			b.active = b.tabs[n-1]
		}
	}
}

// expect returns a channel that gets the next event of method on session;
// ask before the command that causes it.
func (b *browserLink) expect(session, method string) <-chan json.RawMessage {
	ch := make(chan json.RawMessage, 1)
	b.mu.Lock()
	b.waiters = append(b.waiters, eventWaiter{session: session, method: method, ch: ch})
	b.mu.Unlock()
	return ch
}

func (b *browserLink) unexpect(ch <-chan json.RawMessage) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiters = slices.DeleteFunc(b.waiters, func(w eventWaiter) bool { return w.ch == ch })
}

// state is the browser_state of the tabs now, with the tabs opened since
// the call began and the downloads' changes not yet reported (now they
// are).
func (b *browserLink) state() *browsertool.BrowserState {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := &browsertool.BrowserState{Tabs: []browsertool.Tab{}}
	for _, t := range b.tabs {
		st.Tabs = append(st.Tabs, browsertool.Tab{TabID: t.id, Title: clip(t.title), URL: clip(t.url), Active: t == b.active})
	}
	for _, id := range b.opened {
		if slices.ContainsFunc(b.tabs, func(t *browserTab) bool { return t.id == id }) {
			st.StateChanges = append(st.StateChanges, browsertool.StateChange{Type: "tab_opened", TabID: id})
		}
	}
	st.StateChanges = append(st.StateChanges, b.pending...)
	b.pending = nil
	return st
}

// clip keeps a title or URL within browser_state's limit.
func clip(s string) string {
	if r := []rune(s); len(r) > browsertool.MaxFieldChars {
		return string(r[:browsertool.MaxFieldChars])
	}
	return s
}

// consoleLine renders one console call: its level and its arguments.
func consoleLine(params json.RawMessage) string {
	var p struct {
		Type string `json:"type"`
		Args []struct {
			Value       any    `json:"value"`
			Description string `json:"description"`
		} `json:"args"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	line := p.Type + ":"
	for _, a := range p.Args {
		v := a.Description
		if a.Value != nil {
			if s, ok := a.Value.(string); ok {
				v = s
			} else {
				b, _ := json.Marshal(a.Value)
				v = string(b)
			}
		}
		line += " " + v
	}
	return line
}
