package browsertool

import (
	"strconv"
	"strings"
)

// StateText renders a browser_state block as text, the way the Messages
// API renders one for the model (the model never sees the raw fields), so
// a door that has no such API in between (MCP) shows the model the same.
// member is the call's, tabID its input's tab_id ("" when it named none),
// and withText whether the result holds a text block, which the Tab
// Context footer hangs off. The text goes after the result's text, a
// blank line between; "" means the API would render nothing.
//
// The docs fix the tab members' lines, the footer and the completed
// download's line; the tab_opened line of a non-tab member and the
// started and failed downloads' lines are our wording, in the same form.
// Tab lines in the footer carry no "(current)", as the docs' example; the
// API's deduplication of a footer repeated across a turn's results is the
// caller's when it renders several.
func StateText(member, tabID string, withText bool, s BrowserState) string {
	var lines []string
	switch member {
	case ListTabs:
		if len(s.Tabs) == 0 {
			lines = append(lines, "No tabs available")
		} else {
			lines = append(lines, "Available tabs:")
			lines = append(lines, tabLines(s.Tabs, true)...)
		}
	case SwitchTab:
		lines = append(lines, "Switched to tab "+tabID)
	case CloseTab:
		lines = append(lines, "Closed tab "+tabID)
	case NewTab:
		if t, ok := openedTab(s); ok {
			lines = append(lines, "Created new tab with tab_id: "+t.TabID+", URL: "+t.URL+". It is now the current tab.")
		}
	}
	downloads := false
	for _, c := range s.StateChanges {
		if c.Type == "tab_opened" {
			if member != NewTab {
				lines = append(lines, openedLine(s, c.TabID))
			}
			continue
		}
		downloads = true
		lines = append(lines, downloadLine(c))
	}
	if footer := footerLines(member, tabID, withText || downloads, s); footer != nil {
		if len(lines) > 0 {
			lines = append(lines, "")
		}
		lines = append(lines, footer...)
	}
	return strings.Join(lines, "\n")
}

// footerLines is the Tab Context footer, or nil where the docs give none:
// on a tab member's result (its own lines say it all), on zoom's, on one
// with neither text nor a download, and with no tab to name.
func footerLines(member, tabID string, withLines bool, s BrowserState) []string {
	if IsTabMember(member) || member == Zoom || !withLines || (len(s.Tabs) == 0 && tabID == "") {
		return nil
	}
	on := tabID
	if on == "" {
		for _, t := range s.Tabs {
			if t.Active {
				on = t.TabID
			}
		}
	}
	lines := []string{"Tab Context:", "- Executed on tab_id: " + on}
	if len(s.Tabs) == 0 {
		// Our wording: the docs show no footer without tabs.
		return append(lines, "- Available tabs: none")
	}
	lines = append(lines, "- Available tabs:")
	return append(lines, tabLines(s.Tabs, false)...)
}

// tabLines lists tabs as `  • tab_id tab-1: "Title" (url)`, the active
// one marked (current) when current is asked for.
func tabLines(tabs []Tab, current bool) []string {
	var lines []string
	for _, t := range tabs {
		l := "  • tab_id " + t.TabID + ": " + quote(t.Title) + " (" + t.URL + ")"
		if current && t.Active {
			l += " (current)"
		}
		lines = append(lines, l)
	}
	return lines
}

// openedTab is the tab a new_tab opened: the one its tab_opened names.
func openedTab(s BrowserState) (Tab, bool) {
	for _, c := range s.StateChanges {
		if c.Type != "tab_opened" {
			continue
		}
		for _, t := range s.Tabs {
			if t.TabID == c.TabID {
				return t, true
			}
		}
	}
	return Tab{}, false
}

// openedLine tells of a tab a page opened during another member's call.
func openedLine(s BrowserState, id string) string {
	for _, t := range s.Tabs {
		if t.TabID != id {
			continue
		}
		l := "Opened new tab with tab_id: " + id + ", URL: " + t.URL + "."
		if t.Active {
			l += " It is now the current tab."
		}
		return l
	}
	return "Opened new tab with tab_id: " + id + "."
}

// downloadLine is one download change, quoting its URL, path and error.
func downloadLine(c StateChange) string {
	var b strings.Builder
	switch c.Type {
	case "download_started":
		b.WriteString("Download started")
	case "download_completed":
		b.WriteString("Download completed")
	case "download_failed":
		b.WriteString("Download failed")
	default:
		b.WriteString("Download " + c.Type)
	}
	b.WriteString(" with download_id: " + c.DownloadID + ", URL: " + quote(c.URL) + ".")
	if c.Path != "" {
		b.WriteString(" Saved to " + quote(c.Path) + ".")
	}
	if c.SizeBytes != nil {
		b.WriteString(" Size: " + strconv.FormatInt(*c.SizeBytes, 10) + " bytes.")
	}
	if c.Error != "" {
		b.WriteString(" Error: " + quote(c.Error) + ".")
	}
	return b.String()
}

// quote puts a title or download value in double quotes, escaping `"`
// and `\` as the API does.
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
