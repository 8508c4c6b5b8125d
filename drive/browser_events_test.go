package drive

import (
	"encoding/json"
	"testing"

	"github.com/warmdesk/warmdesk/devtools"
)

// A download's changes reach the next result's browser_state once, the
// newest per download, and within the block's rules.
func TestDownloadChangesReachTheNextResultOnce(t *testing.T) {
	b := &browserLink{}
	ev := func(method, params string) { b.event(devtools.Event{Method: method, Params: json.RawMessage(params)}) }
	ev("Browser.downloadWillBegin", `{"guid": "g1", "url": "http://host:1/a.csv", "suggestedFilename": "a.csv"}`)
	st := b.state()
	if len(st.StateChanges) != 1 || st.StateChanges[0].Type != "download_started" || st.StateChanges[0].DownloadID != "g1" {
		t.Fatalf("after the start: %+v", st.StateChanges)
	}
	if len(b.pending) != 0 || len(b.state().StateChanges) != 0 {
		t.Fatal("a reported change was reported again")
	}
	ev("Browser.downloadWillBegin", `{"guid": "g2", "url": "http://host:1/b.bin", "suggestedFilename": "b.bin"}`)
	ev("Browser.downloadProgress", `{"guid": "g1", "state": "inProgress", "receivedBytes": 3}`)
	ev("Browser.downloadProgress", `{"guid": "g1", "state": "completed", "receivedBytes": 12}`)
	ev("Browser.downloadProgress", `{"guid": "g2", "state": "completed", "receivedBytes": 5, "filePath": "/root/Downloads/b (1).bin"}`)
	ev("Browser.downloadProgress", `{"guid": "unknown", "state": "completed"}`)
	st = b.state()
	if err := st.Validate(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"g1": DownloadDir + "/a.csv", "g2": "/root/Downloads/b (1).bin"}
	if len(st.StateChanges) != 2 {
		t.Fatalf("changes: %+v", st.StateChanges)
	}
	for _, c := range st.StateChanges {
		if c.Type != "download_completed" || c.Path != want[c.DownloadID] || c.SizeBytes == nil {
			t.Errorf("change %+v, want completed at %s", c, want[c.DownloadID])
		}
	}
	ev("Browser.downloadWillBegin", `{"guid": "g3", "url": "http://host:1/c", "suggestedFilename": "c"}`)
	ev("Browser.downloadProgress", `{"guid": "g3", "state": "canceled"}`)
	if st := b.state(); len(st.StateChanges) != 1 || st.StateChanges[0].Type != "download_failed" || st.StateChanges[0].Error == "" {
		t.Fatalf("canceled: %+v", st.StateChanges)
	}
}

// read_network lists a tab's requests since the last read, one per line,
// and keeps the pending ones for the next.
func TestReadNetworkListsRequestsSinceTheLastRead(t *testing.T) {
	tab := &browserTab{id: "tab-1", session: "s1", refs: map[int64]string{}, nodes: map[string]int64{}}
	b := &browserLink{tabs: []*browserTab{tab}}
	ev := func(method, params string) {
		b.event(devtools.Event{Method: method, Session: "s1", Params: json.RawMessage(params)})
	}
	ev("Network.requestWillBeSent", `{"requestId": "1", "timestamp": 10.0, "request": {"method": "GET", "url": "http://host:1/"}}`)
	ev("Network.responseReceived", `{"requestId": "1", "response": {"status": 200, "mimeType": "text/html"}}`)
	ev("Network.loadingFinished", `{"requestId": "1", "timestamp": 10.25}`)
	ev("Network.requestWillBeSent", `{"requestId": "2", "timestamp": 11, "request": {"method": "POST", "url": "http://host:1/api"}}`)
	ev("Network.requestWillBeSent", `{"requestId": "3", "timestamp": 11, "request": {"method": "GET", "url": "http://host:2/x"}}`)
	ev("Network.loadingFailed", `{"requestId": "3", "errorText": "net::ERR_CONNECTION_REFUSED"}`)
	ev("Network.requestWillBeSent", `{"requestId": "4", "timestamp": 12, "request": {"method": "GET", "url": "http://other/"}}`)
	b.event(devtools.Event{Method: "Network.loadingFinished", Session: "elsewhere", Params: json.RawMessage(`{"requestId": "4", "timestamp": 13}`)})
	got := b.readNetwork(tab)
	want := "GET http://host:1/ 200 text/html 250 ms\nPOST http://host:1/api pending\nGET http://host:2/x failed: net::ERR_CONNECTION_REFUSED\nGET http://other/ pending"
	if got != want {
		t.Fatalf("first read:\n%s\nwant:\n%s", got, want)
	}
	ev("Network.responseReceived", `{"requestId": "2", "response": {"status": 201, "mimeType": "application/json"}}`)
	ev("Network.loadingFinished", `{"requestId": "2", "timestamp": 11.5}`)
	if got, want := b.readNetwork(tab), "POST http://host:1/api 201 application/json 500 ms\nGET http://other/ pending"; got != want {
		t.Fatalf("second read:\n%s\nwant:\n%s", got, want)
	}
}

// A redirect's hops are a line each.
func TestReadNetworkSplitsRedirects(t *testing.T) {
	tab := &browserTab{session: "s"}
	b := &browserLink{tabs: []*browserTab{tab}}
	for _, e := range []struct{ method, params string }{
		{"Network.requestWillBeSent", `{"requestId": "1", "timestamp": 1, "request": {"method": "GET", "url": "http://a/"}}`},
		{"Network.requestWillBeSent", `{"requestId": "1", "timestamp": 1.25, "request": {"method": "GET", "url": "http://b/"}, "redirectResponse": {"status": 302, "mimeType": "text/html"}}`},
		{"Network.responseReceived", `{"requestId": "1", "response": {"status": 200, "mimeType": "text/plain"}}`},
		{"Network.loadingFinished", `{"requestId": "1", "timestamp": 1.5}`},
	} {
		b.event(devtools.Event{Method: e.method, Session: "s", Params: json.RawMessage(e.params)})
	}
	if got, want := b.readNetwork(tab), "GET http://a/ 302 text/html 250 ms\nGET http://b/ 200 text/plain 250 ms"; got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}
