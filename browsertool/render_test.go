package browsertool_test

import (
	"testing"

	bt "github.com/warmdesk/warmdesk/browsertool"
)

// StateText renders browser_state blocks as the reference's examples show
// the API rendering them for the model.
func TestStateText(t *testing.T) {
	docs := bt.Tab{TabID: "tab-1", Title: "Documentation", URL: "https://example.com/docs", Active: true}
	pricing := bt.Tab{TabID: "tab-2", Title: "Pricing", URL: "https://example.com/pricing"}
	blank := bt.Tab{TabID: "tab-3", Title: "", URL: "about:blank", Active: true}
	size := int64(48213)
	completed := bt.StateChange{Type: "download_completed", DownloadID: "dl-1", URL: "https://example.com/price-list.csv",
		Path: "/home/user/downloads/price-list.csv", SizeBytes: &size}
	footer := "Tab Context:\n- Executed on tab_id: tab-1\n- Available tabs:\n  • tab_id tab-1: \"Documentation\" (https://example.com/docs)"
	cases := []struct {
		name, member, tabID string
		withText            bool
		state               bt.BrowserState
		want                string
	}{
		{"list_tabs", bt.ListTabs, "", false, bt.BrowserState{Tabs: []bt.Tab{docs, pricing}},
			"Available tabs:\n  • tab_id tab-1: \"Documentation\" (https://example.com/docs) (current)\n  • tab_id tab-2: \"Pricing\" (https://example.com/pricing)"},
		{"list_tabs with none", bt.ListTabs, "", false, bt.BrowserState{Tabs: []bt.Tab{}}, "No tabs available"},
		{"switch_tab names the input's tab", bt.SwitchTab, "tab-2", false, bt.BrowserState{Tabs: []bt.Tab{docs, pricing}}, "Switched to tab tab-2"},
		{"close_tab", bt.CloseTab, "tab-2", false, bt.BrowserState{Tabs: []bt.Tab{docs}}, "Closed tab tab-2"},
		{"new_tab", bt.NewTab, "", false, bt.BrowserState{Tabs: []bt.Tab{{TabID: "tab-1", Title: "Documentation", URL: "https://example.com/docs"}, blank},
			StateChanges: []bt.StateChange{{Type: "tab_opened", TabID: "tab-3"}}},
			"Created new tab with tab_id: tab-3, URL: about:blank. It is now the current tab."},
		{"the footer after a member's text", bt.Navigate, "", true, bt.BrowserState{Tabs: []bt.Tab{docs}}, footer},
		{"the footer names the input's tab", bt.GetPageText, "tab-2", true, bt.BrowserState{Tabs: []bt.Tab{docs, pricing}},
			"Tab Context:\n- Executed on tab_id: tab-2\n- Available tabs:\n  • tab_id tab-1: \"Documentation\" (https://example.com/docs)\n  • tab_id tab-2: \"Pricing\" (https://example.com/pricing)"},
		{"a download before the footer", bt.LeftClick, "", true, bt.BrowserState{Tabs: []bt.Tab{docs}, StateChanges: []bt.StateChange{completed}},
			"Download completed with download_id: dl-1, URL: \"https://example.com/price-list.csv\". Saved to \"/home/user/downloads/price-list.csv\". Size: 48213 bytes.\n\n" + footer},
		{"a download on a tab member's result", bt.ListTabs, "", false, bt.BrowserState{Tabs: []bt.Tab{docs}, StateChanges: []bt.StateChange{
			{Type: "download_failed", DownloadID: "dl-2", URL: "https://example.com/a.zip", Error: "NETWORK_FAILED"}}},
			"Available tabs:\n  • tab_id tab-1: \"Documentation\" (https://example.com/docs) (current)\nDownload failed with download_id: dl-2, URL: \"https://example.com/a.zip\". Error: \"NETWORK_FAILED\"."},
		{"a download on a result without text", bt.Screenshot, "", false, bt.BrowserState{Tabs: []bt.Tab{docs}, StateChanges: []bt.StateChange{
			{Type: "download_started", DownloadID: "dl-3", URL: "https://example.com/b.pdf"}}},
			"Download started with download_id: dl-3, URL: \"https://example.com/b.pdf\".\n\n" + footer},
		{"a tab a page opened", bt.LeftClick, "", true, bt.BrowserState{Tabs: []bt.Tab{docs, pricing}, StateChanges: []bt.StateChange{{Type: "tab_opened", TabID: "tab-2"}}},
			"Opened new tab with tab_id: tab-2, URL: https://example.com/pricing.\n\nTab Context:\n- Executed on tab_id: tab-1\n- Available tabs:\n  • tab_id tab-1: \"Documentation\" (https://example.com/docs)\n  • tab_id tab-2: \"Pricing\" (https://example.com/pricing)"},
		{"no footer on zoom", bt.Zoom, "", true, bt.BrowserState{Tabs: []bt.Tab{docs}}, ""},
		{"no footer without text", bt.Screenshot, "", false, bt.BrowserState{Tabs: []bt.Tab{docs}}, ""},
		{"no footer without a tab to name", bt.Navigate, "", true, bt.BrowserState{Tabs: []bt.Tab{}}, ""},
		{"titles quoted, URLs verbatim", bt.ListTabs, "", false, bt.BrowserState{Tabs: []bt.Tab{{TabID: "tab-9", Title: `Say "hi" \ bye`, URL: `https://example.com/?q="x"`, Active: true}}},
			"Available tabs:\n  • tab_id tab-9: \"Say \\\"hi\\\" \\\\ bye\" (https://example.com/?q=\"x\") (current)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := bt.StateText(c.member, c.tabID, c.withText, c.state); got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}
