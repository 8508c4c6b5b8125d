package drive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/browsertool"
)

// browserExec runs one turn's calls on a desktop's browser link.
type browserExec struct {
	s  *Service
	id string
	b  *browserLink
}

var _ browsertool.Executor = (*browserExec)(nil)

// errNotBuilt answers a member this executor does not run (one added to
// package browsertool and not here), in the SDK's words.
func errNotBuilt(member string) error {
	return fmt.Errorf("The browser toolset member '%s' is not available in this environment.", member)
}

func (x *browserExec) Run(ctx context.Context, c browsertool.Call) (browsertool.Outcome, error) {
	x.b.mu.Lock()
	x.b.opened = nil
	x.b.mu.Unlock()
	if isInput(c.Member) {
		d, err := x.s.mgr.Get(x.id)
		if err != nil {
			return browsertool.Outcome{}, err
		}
		if err := d.InputAllowed(); err != nil {
			return browsertool.Outcome{}, err
		}
	}
	switch c.Member {
	case browsertool.NewTab, browsertool.ListTabs, browsertool.SwitchTab, browsertool.CloseTab:
		if err := x.tabMember(ctx, c); err != nil {
			return browsertool.Outcome{}, err
		}
		return browsertool.Outcome{State: x.b.state()}, nil
	}
	tab, err := x.tab(ctx, c.TabID)
	if err != nil {
		return browsertool.Outcome{}, err
	}
	x.b.mu.Lock()
	before := tab.url // events update it
	x.b.mu.Unlock()
	out, err := x.member(ctx, tab, c)
	if err != nil {
		return browsertool.Outcome{}, err
	}
	x.b.mu.Lock()
	changed := len(x.b.opened) > 0 || tab.url != before || len(x.b.pending) > 0
	x.b.mu.Unlock()
	if changed || c.Member == browsertool.Navigate {
		out.State = x.b.state()
	}
	return out, nil
}

// isInput tells the members a person's control refuses.
func isInput(member string) bool {
	switch member {
	case browsertool.LeftClick, browsertool.RightClick, browsertool.MiddleClick, browsertool.DoubleClick,
		browsertool.TripleClick, browsertool.Hover, browsertool.LeftClickDrag, browsertool.LeftMouseDown,
		browsertool.LeftMouseUp, browsertool.MouseMove, browsertool.Scroll, browsertool.ScrollTo,
		browsertool.Type, browsertool.Key, browsertool.HoldKey, browsertool.FormInput, browsertool.Navigate,
		browsertool.FileUpload, browsertool.JavascriptExec, browsertool.NewTab, browsertool.SwitchTab, browsertool.CloseTab:
		return true
	}
	return false
}

// tab finds the tab a call addresses (the active one when id is empty),
// attached.
func (x *browserExec) tab(ctx context.Context, id string) (*browserTab, error) {
	x.b.mu.Lock()
	tab, err := x.b.active, error(nil)
	if id != "" {
		tab, err = x.b.byID(id)
	}
	x.b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if tab == nil {
		return nil, errors.New("no tab is open: open one with new_tab")
	}
	if tab.session != "" {
		return tab, nil
	}
	var attached struct {
		Session string `json:"sessionId"`
	}
	if err := x.b.cdp.Call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": tab.target, "flatten": true}, &attached); err != nil {
		return nil, fmt.Errorf("attach to tab %s: %w", tab.id, err)
	}
	x.b.mu.Lock()
	tab.session = attached.Session
	x.b.mu.Unlock()
	for _, m := range []string{"Page.enable", "Runtime.enable", "Network.enable"} {
		if err := x.b.cdp.Call(ctx, attached.Session, m, nil, nil); err != nil {
			x.b.mu.Lock()
			tab.session = "" // attached again, and enabled, by the next call
			x.b.mu.Unlock()
			return nil, fmt.Errorf("tab %s: %w", tab.id, err)
		}
	}
	return tab, nil
}

func (x *browserExec) tabMember(ctx context.Context, c browsertool.Call) error {
	cdp := x.b.cdp
	switch c.Member {
	case browsertool.ListTabs:
		return nil
	case browsertool.NewTab:
		var created struct {
			ID string `json:"targetId"`
		}
		if err := cdp.Call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &created); err != nil {
			return fmt.Errorf("open a tab: %w", err)
		}
		x.b.mu.Lock()
		tab := x.b.addTarget(targetInfo{ID: created.ID, Type: "page", URL: "about:blank"})
		x.b.active = tab
		x.b.mu.Unlock()
		return nil
	}
	x.b.mu.Lock()
	tab, err := x.b.byID(c.TabID)
	x.b.mu.Unlock()
	if err != nil {
		return err
	}
	if c.Member == browsertool.SwitchTab {
		if err := cdp.Call(ctx, "", "Target.activateTarget", map[string]any{"targetId": tab.target}, nil); err != nil {
			return fmt.Errorf("switch to tab %s: %w", tab.id, err)
		}
		x.b.mu.Lock()
		x.b.active = tab
		x.b.mu.Unlock()
		return nil
	}
	var closed struct {
		Success bool `json:"success"`
	}
	if err := cdp.Call(ctx, "", "Target.closeTarget", map[string]any{"targetId": tab.target}, &closed); err != nil {
		return fmt.Errorf("close tab %s: %w", tab.id, err)
	}
	x.b.mu.Lock()
	x.b.removeTarget(tab.target)
	front := x.b.active
	x.b.mu.Unlock()
	if front != nil {
		if err := cdp.Call(ctx, "", "Target.activateTarget", map[string]any{"targetId": front.target}, nil); err != nil {
			return fmt.Errorf("bring tab %s to the front: %w", front.id, err)
		}
	}
	return nil
}

func (x *browserExec) member(ctx context.Context, tab *browserTab, c browsertool.Call) (browsertool.Outcome, error) {
	cdp, sess := x.b.cdp, tab.session
	text := func(s string) (browsertool.Outcome, error) { return browsertool.Outcome{Text: s}, nil }
	switch c.Member {
	case browsertool.Navigate:
		return x.navigate(ctx, tab, c.URL)
	case browsertool.Screenshot:
		return x.capture(ctx, tab, nil)
	case browsertool.Zoom:
		return x.capture(ctx, tab, &c.Region)
	case browsertool.LeftClick, browsertool.RightClick, browsertool.MiddleClick, browsertool.DoubleClick, browsertool.TripleClick:
		p, err := x.point(ctx, tab, c.Target)
		if err != nil {
			return browsertool.Outcome{}, err
		}
		button, count := "left", 1
		switch c.Member {
		case browsertool.RightClick:
			button = "right"
		case browsertool.MiddleClick:
			button = "middle"
		case browsertool.DoubleClick:
			count = 2
		case browsertool.TripleClick:
			count = 3
		}
		mods := 0
		for _, m := range c.Modifiers {
			k, err := lookupKey(m)
			if err != nil {
				return browsertool.Outcome{}, err
			}
			mods |= modifierBit(k)
		}
		if err := x.click(ctx, sess, p, button, count, mods); err != nil {
			return browsertool.Outcome{}, err
		}
		if c.Target.IsRef() {
			return text(fmt.Sprintf("Clicked element %s.", c.Target.Ref))
		}
		return text("")
	case browsertool.Hover, browsertool.MouseMove:
		p, err := x.point(ctx, tab, c.Target)
		if err != nil {
			return browsertool.Outcome{}, err
		}
		return browsertool.Outcome{}, x.mouse(ctx, sess, "mouseMoved", p, "none", 0, 0)
	case browsertool.LeftMouseDown, browsertool.LeftMouseUp:
		kind := "mousePressed"
		if c.Member == browsertool.LeftMouseUp {
			kind = "mouseReleased"
		}
		p := point{c.Target.X, c.Target.Y}
		if err := x.mouse(ctx, sess, "mouseMoved", p, "none", 0, 0); err != nil {
			return browsertool.Outcome{}, err
		}
		return browsertool.Outcome{}, x.mouse(ctx, sess, kind, p, "left", 1, 0)
	case browsertool.LeftClickDrag:
		from, to := point{c.From.X, c.From.Y}, point{c.Target.X, c.Target.Y}
		steps := []struct {
			kind   string
			at     point
			button string
		}{{"mouseMoved", from, "none"}, {"mousePressed", from, "left"}, {"mouseMoved", point{(from.x + to.x) / 2, (from.y + to.y) / 2}, "left"}, {"mouseMoved", to, "left"}, {"mouseReleased", to, "left"}}
		for _, st := range steps {
			if err := x.mouse(ctx, sess, st.kind, st.at, st.button, 1, 0); err != nil {
				return browsertool.Outcome{}, err
			}
		}
		return text("")
	case browsertool.Scroll:
		dx, dy := 0, 0
		const notch = 100 // pixels a wheel notch, as Chromium scrolls one
		switch c.Direction {
		case "up":
			dy = -notch * c.Amount
		case "down":
			dy = notch * c.Amount
		case "left":
			dx = -notch * c.Amount
		case "right":
			dx = notch * c.Amount
		}
		err := cdp.Call(ctx, sess, "Input.dispatchMouseEvent", map[string]any{"type": "mouseWheel", "x": c.Target.X, "y": c.Target.Y, "deltaX": dx, "deltaY": dy}, nil)
		return browsertool.Outcome{}, err
	case browsertool.ScrollTo:
		node, err := x.node(tab, c.Target.Ref)
		if err != nil {
			return browsertool.Outcome{}, err
		}
		if err := cdp.Call(ctx, sess, "DOM.scrollIntoViewIfNeeded", map[string]any{"backendNodeId": node}, nil); err != nil {
			return browsertool.Outcome{}, x.stale(c.Target.Ref, err)
		}
		return text("")
	case browsertool.Type:
		return browsertool.Outcome{}, cdp.Call(ctx, sess, "Input.insertText", map[string]any{"text": c.Text}, nil)
	case browsertool.Key:
		for range c.Repeat {
			for _, chord := range strings.Fields(c.Text) {
				if err := x.pressChord(ctx, sess, chord, 0); err != nil {
					return browsertool.Outcome{}, err
				}
			}
		}
		return text("")
	case browsertool.HoldKey:
		return browsertool.Outcome{}, x.pressChord(ctx, sess, c.Text, time.Duration(c.Seconds*float64(time.Second)))
	case browsertool.Wait:
		t := time.NewTimer(time.Duration(c.Seconds * float64(time.Second)))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return browsertool.Outcome{}, ctx.Err()
		}
		return text("")
	case browsertool.ReadPage, browsertool.Find:
		return x.readTree(ctx, tab, c)
	case browsertool.GetPageText:
		s, err := x.evaluate(ctx, sess, `(() => { const m = document.querySelector("article, main, [role=main]"); const body = document.body ? document.body.innerText : ""; if (!m) return body; const first = m.innerText; return first + (body.length > first.length ? "\n\n" + body.replace(first, "") : ""); })()`)
		if len(s) > MaxPageText {
			s = s[:MaxPageText] + fmt.Sprintf("\n(cut: the text is capped at %d characters)", MaxPageText)
		}
		return browsertool.Outcome{Text: strings.TrimSpace(s)}, err
	case browsertool.FormInput:
		return x.formInput(ctx, tab, c)
	case browsertool.JavascriptExec:
		s, err := x.evaluate(ctx, sess, c.Text)
		return browsertool.Outcome{Text: s}, err
	case browsertool.ReadConsole:
		x.b.mu.Lock()
		lines := tab.console
		tab.console = nil
		x.b.mu.Unlock()
		return text(strings.Join(lines, "\n"))
	case browsertool.ReadNetwork:
		return text(x.b.readNetwork(tab))
	case browsertool.FileUpload:
		return x.fileUpload(ctx, tab, c)
	}
	return browsertool.Outcome{}, errNotBuilt(c.Member)
}

type point struct{ x, y int }

// point resolves a target: a coordinate as it is, a ref to the centre of
// its element, scrolled into view first.
func (x *browserExec) point(ctx context.Context, tab *browserTab, t browsertool.Target) (point, error) {
	if !t.IsRef() {
		return point{t.X, t.Y}, nil
	}
	node, err := x.node(tab, t.Ref)
	if err != nil {
		return point{}, err
	}
	cdp, sess := x.b.cdp, tab.session
	if err := cdp.Call(ctx, sess, "DOM.scrollIntoViewIfNeeded", map[string]any{"backendNodeId": node}, nil); err != nil {
		return point{}, x.stale(t.Ref, err)
	}
	var quads struct {
		Quads [][]float64 `json:"quads"`
	}
	if err := cdp.Call(ctx, sess, "DOM.getContentQuads", map[string]any{"backendNodeId": node}, &quads); err != nil {
		return point{}, x.stale(t.Ref, err)
	}
	if len(quads.Quads) == 0 || len(quads.Quads[0]) != 8 {
		return point{}, fmt.Errorf("%s has no box on the page (hidden?): read the page again", t.Ref)
	}
	q := quads.Quads[0]
	return point{int(math.Round((q[0] + q[2] + q[4] + q[6]) / 4)), int(math.Round((q[1] + q[3] + q[5] + q[7]) / 4))}, nil
}

// node is a ref's DOM node in tab, or the docs' stale-ref error.
func (x *browserExec) node(tab *browserTab, ref string) (int64, error) {
	x.b.mu.Lock()
	defer x.b.mu.Unlock()
	node, ok := tab.nodes[ref]
	if !ok {
		return 0, x.stale(ref, nil)
	}
	return node, nil
}

func (x *browserExec) stale(ref string, err error) error {
	msg := fmt.Sprintf("%s is stale or not found on the current page. Re-read the page to get fresh references.", ref)
	if err != nil {
		msg += " (" + err.Error() + ")"
	}
	return errors.New(msg)
}

func (x *browserExec) mouse(ctx context.Context, sess, kind string, p point, button string, count, mods int) error {
	return x.b.cdp.Call(ctx, sess, "Input.dispatchMouseEvent", map[string]any{
		"type": kind, "x": p.x, "y": p.y, "button": button, "clickCount": count, "modifiers": mods,
	}, nil)
}

func (x *browserExec) click(ctx context.Context, sess string, p point, button string, count, mods int) error {
	if err := x.mouse(ctx, sess, "mouseMoved", p, "none", 0, mods); err != nil {
		return err
	}
	for i := 1; i <= count; i++ {
		if err := x.mouse(ctx, sess, "mousePressed", p, button, i, mods); err != nil {
			return err
		}
		if err := x.mouse(ctx, sess, "mouseReleased", p, button, i, mods); err != nil {
			return err
		}
	}
	return nil
}

// pressChord presses a chord's modifiers, then its key, holding it for
// hold, and releases them in reverse.
func (x *browserExec) pressChord(ctx context.Context, sess, chord string, hold time.Duration) error {
	mods, key, err := parseKeyChord(chord)
	if err != nil {
		return err
	}
	bits := 0
	send := func(kind string, k cdpKey) error {
		p := map[string]any{"type": kind, "key": k.key, "code": k.code, "windowsVirtualKeyCode": k.vk, "modifiers": bits}
		if kind == "keyDown" && k.text != "" && bits&(modCtrl|modAlt|modMeta) == 0 {
			p["text"] = k.text
		}
		return x.b.cdp.Call(ctx, sess, "Input.dispatchKeyEvent", p, nil)
	}
	for _, m := range mods {
		bits |= modifierBit(m)
		if err := send("rawKeyDown", m); err != nil {
			return err
		}
	}
	down := "rawKeyDown"
	if key.text != "" && bits&(modCtrl|modAlt|modMeta) == 0 {
		down = "keyDown"
	}
	if err := send(down, key); err != nil {
		return err
	}
	if hold > 0 {
		t := time.NewTimer(hold)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	err = send("keyUp", key)
	for i := len(mods) - 1; i >= 0; i-- {
		bits &^= modifierBit(mods[i])
		if uerr := send("keyUp", mods[i]); err == nil {
			err = uerr
		}
	}
	return err
}

// evaluate runs JavaScript in the tab's page and renders its value.
func (x *browserExec) evaluate(ctx context.Context, sess, expr string) (string, error) {
	var res struct {
		Result struct {
			Type        string          `json:"type"`
			Value       json.RawMessage `json:"value"`
			Description string          `json:"description"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception *struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := x.b.cdp.Call(ctx, sess, "Runtime.evaluate", map[string]any{
		"expression": expr, "replMode": true, "returnByValue": true, "awaitPromise": true, "timeout": 10000, "userGesture": true,
	}, &res)
	if err != nil {
		return "", err
	}
	if e := res.Exception; e != nil {
		msg := e.Text
		if e.Exception != nil && e.Exception.Description != "" {
			msg = e.Exception.Description
		}
		return "", fmt.Errorf("the script threw: %s", msg)
	}
	if res.Result.Type == "undefined" {
		return "undefined", nil
	}
	var s string
	if json.Unmarshal(res.Result.Value, &s) == nil {
		return s, nil
	}
	if len(res.Result.Value) > 0 {
		return string(res.Result.Value), nil
	}
	return res.Result.Description, nil
}

// navigate loads a URL (or moves through history) and waits for the
// page's load event, up to NavigationTimeout.
func (x *browserExec) navigate(ctx context.Context, tab *browserTab, url string) (browsertool.Outcome, error) {
	cdp, sess := x.b.cdp, tab.session
	loaded := x.b.expect(sess, "Page.loadEventFired")
	defer x.b.unexpect(loaded)
	committed := x.b.expect(sess, "Page.frameNavigated")
	defer x.b.unexpect(committed)
	var err error
	switch url {
	case "reload":
		err = cdp.Call(ctx, sess, "Page.reload", nil, nil)
	case "back", "forward":
		var hist struct {
			Current int `json:"currentIndex"`
			Entries []struct {
				ID int `json:"id"`
			} `json:"entries"`
		}
		if err = cdp.Call(ctx, sess, "Page.getNavigationHistory", nil, &hist); err != nil {
			break
		}
		to := hist.Current - 1
		if url == "forward" {
			to = hist.Current + 1
		}
		if to < 0 || to >= len(hist.Entries) {
			return browsertool.Outcome{}, fmt.Errorf("there is no page to go %s to in tab %s's history", url, tab.id)
		}
		err = cdp.Call(ctx, sess, "Page.navigateToHistoryEntry", map[string]any{"entryId": hist.Entries[to].ID}, nil)
	default:
		var nav struct {
			ErrorText string `json:"errorText"`
		}
		err = cdp.Call(ctx, sess, "Page.navigate", map[string]any{"url": url}, &nav)
		if err == nil && nav.ErrorText != "" {
			return browsertool.Outcome{}, fmt.Errorf("Navigation to %s failed: %s.", url, nav.ErrorText)
		}
	}
	if err != nil {
		return browsertool.Outcome{}, err
	}
	// NavigationTimeout for the page to answer and its document to
	// commit; then as long again for it to load. Under TCG a new site's
	// renderer takes most of the first: a committed page is there, and a
	// slow load is answered as such, not as a page that is unavailable.
	t := time.NewTimer(NavigationTimeout)
	defer t.Stop()
	stillLoading := false
	for waiting := true; waiting; {
		select {
		case <-loaded:
			waiting = false
		case <-committed:
			committed = nil
			t.Reset(NavigationTimeout)
		case <-t.C:
			if committed != nil {
				return browsertool.Outcome{}, fmt.Errorf("Navigation to %s timed out after %d seconds. The page may be unavailable.", url, int(NavigationTimeout/time.Second))
			}
			stillLoading, waiting = true, false
		case <-ctx.Done():
			return browsertool.Outcome{}, ctx.Err()
		}
	}
	// The target's own title and URL come in an event that may trail the
	// load: read them from the page.
	var loc struct {
		URL   string `json:"url"`
		Title string `json:"title"`
	}
	if js, err := x.evaluate(ctx, tab.session, `JSON.stringify({url: location.href, title: document.title})`); err == nil && json.Unmarshal([]byte(js), &loc) == nil {
		x.b.mu.Lock()
		tab.url, tab.title = loc.URL, loc.Title
		x.b.mu.Unlock()
	}
	x.b.mu.Lock()
	at, title := tab.url, tab.title
	x.b.mu.Unlock()
	line := "Navigated to " + at
	if title != "" {
		line += " — " + title
	}
	if stillLoading {
		line += fmt.Sprintf(" (still loading %d seconds after it answered)", int(NavigationTimeout/time.Second))
	}
	return browsertool.Outcome{Text: line}, nil
}

// capture is a PNG of the tab's viewport, or of a region of it upscaled
// to about the viewport's size (at most 8 times).
func (x *browserExec) capture(ctx context.Context, tab *browserTab, region *[4]int) (browsertool.Outcome, error) {
	params := map[string]any{"format": "png"}
	if region != nil {
		var m struct {
			Viewport struct {
				W float64 `json:"clientWidth"`
				H float64 `json:"clientHeight"`
			} `json:"cssLayoutViewport"`
		}
		if err := x.b.cdp.Call(ctx, tab.session, "Page.getLayoutMetrics", nil, &m); err != nil {
			return browsertool.Outcome{}, err
		}
		w, h := float64(region[2]-region[0]), float64(region[3]-region[1])
		scale := math.Min(8, math.Max(1, math.Min(m.Viewport.W/w, m.Viewport.H/h)))
		params["clip"] = map[string]any{"x": region[0], "y": region[1], "width": w, "height": h, "scale": scale}
	}
	var shot struct {
		Data string `json:"data"`
	}
	if err := x.b.cdp.Call(ctx, tab.session, "Page.captureScreenshot", params, &shot); err != nil {
		return browsertool.Outcome{}, err
	}
	return browsertool.Outcome{Image: &browsertool.ImageSource{Type: "base64", MediaType: "image/png", Data: shot.Data}}, nil
}

// readTree answers read_page and find from the tab's accessibility tree,
// giving each listed element a ref that holds until the tab navigates.
func (x *browserExec) readTree(ctx context.Context, tab *browserTab, c browsertool.Call) (browsertool.Outcome, error) {
	var tree struct {
		Nodes []axNode `json:"nodes"`
	}
	if err := x.b.cdp.Call(ctx, tab.session, "Accessibility.getFullAXTree", nil, &tree); err != nil {
		return browsertool.Outcome{}, err
	}
	var root int64
	if c.Ref != "" {
		node, err := x.node(tab, c.Ref)
		if err != nil {
			return browsertool.Outcome{}, err
		}
		root = node
	}
	depth := c.Depth
	if c.Member == browsertool.Find {
		depth = math.MaxInt32
	}
	lines := flattenAX(tree.Nodes, root, depth, c.Filter == "interactive")
	if root != 0 && len(lines) == 0 {
		return browsertool.Outcome{}, x.stale(c.Ref, nil)
	}
	if c.Member == browsertool.Find {
		lines = findLines(lines, c.Query)
		if len(lines) == 0 {
			return browsertool.Outcome{Text: fmt.Sprintf("No element matches %q (a keyword match on roles, names and values).", c.Query)}, nil
		}
	}
	x.b.mu.Lock()
	defer x.b.mu.Unlock()
	ref := func(backend int64) string {
		if r, ok := tab.refs[backend]; ok {
			return r
		}
		tab.nextRef++
		r := fmt.Sprintf("ref_%d", tab.nextRef)
		tab.refs[backend], tab.nodes[r] = r, backend
		return r
	}
	return browsertool.Outcome{Text: renderTree(lines, ref, c.Member == browsertool.ReadPage)}, nil
}

// setValueJS sets a form control's value the way a person would leave it:
// a checkbox or radio checked by a boolean, a select's option by value or
// visible text, anything else its value; then input and change events.
const setValueJS = `function(v) {
  const el = this;
  if (el instanceof HTMLInputElement && (el.type === "checkbox" || el.type === "radio")) {
    el.checked = (v === true || v === "true" || v === "on");
  } else if (el instanceof HTMLSelectElement) {
    const o = Array.from(el.options).find(o => o.value === String(v) || o.text.trim() === String(v));
    if (!o) throw new Error("no option " + JSON.stringify(String(v)) + "; the options are " + JSON.stringify(Array.from(el.options).map(o => o.text.trim())));
    el.value = o.value;
  } else if ("value" in el) {
    el.focus();
    el.value = String(v);
  } else if (el.isContentEditable) {
    el.textContent = String(v);
  } else {
    throw new Error("a " + el.tagName.toLowerCase() + " element has no value to set");
  }
  el.dispatchEvent(new Event("input", {bubbles: true}));
  el.dispatchEvent(new Event("change", {bubbles: true}));
  return true;
}`

func (x *browserExec) formInput(ctx context.Context, tab *browserTab, c browsertool.Call) (browsertool.Outcome, error) {
	node, err := x.node(tab, c.Target.Ref)
	if err != nil {
		return browsertool.Outcome{}, err
	}
	var resolved struct {
		Object struct {
			ID string `json:"objectId"`
		} `json:"object"`
	}
	if err := x.b.cdp.Call(ctx, tab.session, "DOM.resolveNode", map[string]any{"backendNodeId": node}, &resolved); err != nil {
		return browsertool.Outcome{}, x.stale(c.Target.Ref, err)
	}
	var res struct {
		Exception *struct {
			Exception *struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err = x.b.cdp.Call(ctx, tab.session, "Runtime.callFunctionOn", map[string]any{
		"objectId": resolved.Object.ID, "functionDeclaration": setValueJS, "arguments": []map[string]any{{"value": c.Value}}, "returnByValue": true,
	}, &res)
	if err != nil {
		return browsertool.Outcome{}, err
	}
	if res.Exception != nil {
		msg := "the page refused the value"
		if res.Exception.Exception != nil {
			msg = res.Exception.Exception.Description
		}
		return browsertool.Outcome{}, fmt.Errorf("set the value of %s: %s", c.Target.Ref, msg)
	}
	return browsertool.Outcome{}, nil
}
