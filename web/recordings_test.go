package web_test

import (
	"context"
	"encoding/json"
	"image"
	"image/color"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
	"github.com/warmdesk/warmdesk/internal/testenv"
	"github.com/warmdesk/warmdesk/recording"
	"github.com/warmdesk/warmdesk/web"
)

// A recording through the API on the fake driver, with real ffmpeg: start,
// a second start refused, an exec and a batch in its action log, the REC
// flag on the desktop, stop, the video, delete.
func TestRecordingsThroughTheAPI(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := drivetest.NewDesktop(t)
	svc := drive.New(ctx, drive.Config{Manager: f.Manager, Screens: f.Screens, KeystrokeInterval: time.Microsecond, KeyReaction: 20 * time.Millisecond})
	reg := recording.NewRegistry(t.TempDir(), recording.Options{MinInterval: 10 * time.Millisecond}, nil, nil)
	go reg.Follow(ctx, f.Manager.Events())
	hs := httptest.NewServer(web.New(web.Config{Manager: f.Manager, Drive: svc, Token: actToken, Recordings: reg}).Handler())
	t.Cleanup(hs.Close)
	h := &actHarness{t: t, mgr: f.Manager, guest: f.Guest, src: f.Screen.Src, srv: hs, id: f.ID, f: f}

	code, body := h.do(http.MethodPost, h.path("/recordings"), `{"format":"gif"}`)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "format") {
		t.Errorf("a gif recording: %d %s", code, body)
	}
	code, body = h.do(http.MethodPost, h.path("/recordings"), "")
	if code != http.StatusCreated {
		t.Fatalf("start: %d %s", code, body)
	}
	var rec api.Recording
	json.Unmarshal(body, &rec)
	if rec.State != "recording" || rec.Format != "mp4" || rec.URLs.Video == "" {
		t.Fatalf("started: %s", body)
	}
	if code, body := h.do(http.MethodPost, h.path("/recordings"), ""); code != http.StatusConflict {
		t.Errorf("a second recording at once: %d %s", code, body)
	}
	if d := h.get(); !d.Recording {
		t.Error("the desktop does not say it is being recorded")
	}
	if code, body := h.do(http.MethodPost, h.path("/actions"), `{"actions":[{"action":"key","chord":"Return"}]}`); code != http.StatusOK {
		t.Fatalf("batch: %d %s", code, body)
	}
	h.src.Fill(image.Rect(0, 0, 300, 300), image.NewUniform(color.RGBA{200, 10, 10, 255}))
	if code, body := h.do(http.MethodPost, h.path("/exec"), `{"cmd":"true","args":["s3cret"]}`); code != http.StatusOK {
		t.Fatalf("exec: %d %s", code, body)
	}
	// Events reach the log on their own goroutine: wait for both.
	var actions api.RecordingActions
	if !testenv.Poll(10*time.Second, time.Millisecond, 50*time.Millisecond, func() bool {
		_, body := h.do(http.MethodGet, rec.URLs.Actions, "")
		actions = api.RecordingActions{}
		json.Unmarshal(body, &actions)
		return len(actions.Actions) >= 2
	}) {
		t.Fatalf("action log %+v, want the batch and the exec", actions)
	}
	if a := actions.Actions; a[0].Kind != "action" || a[1].Kind != "exec" || a[0].AtMs > a[1].AtMs {
		t.Errorf("action log %+v, want the batch then the exec, in time order", a)
	}
	// A view token reads the log and the events: a command's arguments
	// (secrets, often) are not in them.
	if a := actions.Actions[1].Summary; strings.Contains(a, "s3cret") || !strings.Contains(a, "true") {
		t.Errorf("exec logged as %q: want the program, not its arguments", a)
	}
	code, body = h.do(http.MethodGet, rec.URLs.Video, "")
	if code != http.StatusConflict || !strings.Contains(string(body), "stop") {
		t.Errorf("the video before the stop: %d %s", code, body)
	}
	code, body = h.do(http.MethodPost, rec.URLs.Stop, "")
	if code != http.StatusOK {
		t.Fatalf("stop: %d %s", code, body)
	}
	json.Unmarshal(body, &rec)
	if rec.State != "done" || rec.Frames < 2 || rec.VideoBytes == 0 || rec.Reason != "stopped" {
		t.Fatalf("stopped: %s", body)
	}
	if d := h.get(); d.Recording {
		t.Error("the desktop still says it is being recorded")
	}
	resp := h.raw(http.MethodGet, rec.URLs.Video)
	video, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || int64(len(video)) != rec.VideoBytes || !strings.Contains(string(video[:64]), "ftyp") {
		t.Errorf("video: %d, %d bytes (want %d, an MP4)", resp.StatusCode, len(video), rec.VideoBytes)
	}
	var list api.RecordingList
	_, body = h.do(http.MethodGet, h.path("/recordings"), "")
	json.Unmarshal(body, &list)
	if len(list.Recordings) != 1 || list.Recordings[0].ID != rec.ID {
		t.Errorf("list %s", body)
	}
	if code, body := h.do(http.MethodDelete, h.path("/recordings/"+rec.ID), ""); code != http.StatusNoContent {
		t.Errorf("delete: %d %s", code, body)
	}
	if code, _ := h.do(http.MethodGet, rec.URLs.Video, ""); code != http.StatusNotFound {
		t.Errorf("the video after delete: %d", code)
	}

	// A recording ends with its desktop.
	code, body = h.do(http.MethodPost, h.path("/recordings"), "")
	if code != http.StatusCreated {
		t.Fatalf("start: %d %s", code, body)
	}
	if err := f.Manager.Delete(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	if !testenv.Poll(10*time.Second, time.Millisecond, 50*time.Millisecond, func() bool { return len(reg.List(f.ID)) == 0 }) {
		t.Errorf("recordings left after the desktop was deleted: %+v", reg.List(f.ID))
	}
}

func (h *actHarness) get() api.Desktop {
	h.t.Helper()
	_, body := h.do(http.MethodGet, h.path(""), "")
	var d api.Desktop
	if err := json.Unmarshal(body, &d); err != nil {
		h.t.Fatal(err)
	}
	return d
}

// raw sends a request with the daemon token and returns the response.
func (h *actHarness) raw(method, path string) *http.Response {
	h.t.Helper()
	req, _ := http.NewRequest(method, h.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+actToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}
