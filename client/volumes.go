package client

import (
	"context"
	"io"
	"net/http"
	"net/url"

	"github.com/warmdesk/warmdesk/api"
)

// CreateVolume makes a volume.
func (c *Client) CreateVolume(ctx context.Context, req api.CreateVolume) (api.Volume, error) {
	var v api.Volume
	err := c.Do(ctx, http.MethodPost, "/v1/volumes", req, &v)
	return v, err
}

// Volumes lists the host's volumes.
func (c *Client) Volumes(ctx context.Context) ([]api.Volume, error) {
	var l api.VolumeList
	err := c.Do(ctx, http.MethodGet, "/v1/volumes", nil, &l)
	return l.Volumes, err
}

// Volume gets one volume.
func (c *Client) Volume(ctx context.Context, name string) (api.Volume, error) {
	var v api.Volume
	err := c.Do(ctx, http.MethodGet, "/v1/volumes/"+url.PathEscape(name), nil, &v)
	return v, err
}

// RemoveVolume deletes a volume no desktop holds.
func (c *Client) RemoveVolume(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/volumes/"+url.PathEscape(name), nil, nil)
}

// FreezeVolume makes volume snapshot snap of a volume.
func (c *Client) FreezeVolume(ctx context.Context, name, snap string) (api.Volume, error) {
	var v api.Volume
	err := c.Do(ctx, http.MethodPost, "/v1/volumes/"+url.PathEscape(name)+"/snapshot", api.FreezeVolume{Name: snap}, &v)
	return v, err
}

// AttachVolume attaches and mounts a volume on a desktop.
func (c *Client) AttachVolume(ctx context.Context, id string, m api.VolumeMount) (api.Desktop, error) {
	var d api.Desktop
	err := c.Do(ctx, http.MethodPost, "/v1/desktops/"+url.PathEscape(id)+"/volumes", m, &d)
	return d, err
}

// DetachVolume unmounts and unplugs a volume from a desktop.
func (c *Client) DetachVolume(ctx context.Context, id, name string) (api.Desktop, error) {
	var d api.Desktop
	err := c.Do(ctx, http.MethodDelete, "/v1/desktops/"+url.PathEscape(id)+"/volumes/"+url.PathEscape(name), nil, &d)
	return d, err
}

// ExportVolume streams a tar of a volume's files into w.
func (c *Client) ExportVolume(ctx context.Context, name string, w io.Writer) (int64, error) {
	return c.download(ctx, "/v1/volumes/"+url.PathEscape(name)+"/archive", w)
}

// ImportVolume fills a blank volume from the tar r.
func (c *Client) ImportVolume(ctx context.Context, name string, r io.Reader) error {
	resp, err := c.send(ctx, http.MethodPut, "/v1/volumes/"+url.PathEscape(name)+"/archive", "application/x-tar", r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		return apiError(resp, data)
	}
	return nil
}
