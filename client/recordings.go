package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/warmdesk/warmdesk/api"
)

func recordingsPath(id string) string { return "/v1/desktops/" + url.PathEscape(id) + "/recordings" }

// StartRecording starts recording a desktop's screen.
func (c *Client) StartRecording(ctx context.Context, id string, req api.StartRecording) (api.Recording, error) {
	var r api.Recording
	err := c.Do(ctx, http.MethodPost, recordingsPath(id), req, &r)
	return r, err
}

// StopRecording ends a recording and waits for its video.
func (c *Client) StopRecording(ctx context.Context, id, rid string) (api.Recording, error) {
	var r api.Recording
	err := c.Do(ctx, http.MethodPost, recordingsPath(id)+"/"+url.PathEscape(rid)+"/stop", nil, &r)
	return r, err
}

// Recordings lists a desktop's recordings.
func (c *Client) Recordings(ctx context.Context, id string) ([]api.Recording, error) {
	var l api.RecordingList
	err := c.Do(ctx, http.MethodGet, recordingsPath(id), nil, &l)
	return l.Recordings, err
}

// RecordingActions is a recording's action log.
func (c *Client) RecordingActions(ctx context.Context, id, rid string) (api.RecordingActions, error) {
	var a api.RecordingActions
	err := c.Do(ctx, http.MethodGet, recordingsPath(id)+"/"+url.PathEscape(rid)+"/actions", nil, &a)
	return a, err
}

// DeleteRecording removes a recording.
func (c *Client) DeleteRecording(ctx context.Context, id, rid string) error {
	return c.Do(ctx, http.MethodDelete, recordingsPath(id)+"/"+url.PathEscape(rid), nil, nil)
}

// DownloadRecording writes a recording's video to w.
func (c *Client) DownloadRecording(ctx context.Context, id, rid string, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+recordingsPath(id)+"/"+url.PathEscape(rid), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e api.Error
		json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e)
		return 0, &Error{Status: resp.StatusCode, ErrorBody: e.Error}
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("recording %s: %w", rid, err)
	}
	return n, nil
}
