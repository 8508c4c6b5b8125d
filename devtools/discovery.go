package devtools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// MaxDiscovery bounds a discovery document read from Chromium (/json/list
// lists every tab; a few KiB each).
const MaxDiscovery = 8 << 20

// RewriteDiscovery rewrites a DevTools discovery document (/json/version:
// one object; /json/list: an array of them) so that its WebSocket URLs
// come back through hostd: base is the public URL of the desktop's DevTools
// root, with scheme ws or wss ("ws://host:8080/v1/desktops/d-1/cdp").
// webSocketDebuggerUrl "ws://127.0.0.1:9222/devtools/page/X" becomes
// base + "/devtools/page/X"; devtoolsFrontendUrl keeps Chromium's
// inspector page but is pointed at that WebSocket. Every other field is
// kept as Chromium wrote it.
func RewriteDiscovery(doc []byte, base *url.URL) ([]byte, error) {
	if base.Scheme != "ws" && base.Scheme != "wss" {
		return nil, fmt.Errorf("discovery base %q: want a ws or wss URL", base.Redacted())
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("discovery document from Chromium: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("discovery document from Chromium: more than one JSON value")
	}
	switch t := v.(type) {
	case map[string]any:
		if err := rewriteTarget(t, base); err != nil {
			return nil, err
		}
	case []any:
		for i, e := range t {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("discovery document from Chromium: entry %d is not an object", i)
			}
			if err := rewriteTarget(m, base); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("discovery document from Chromium: want an object or an array, got %T", v)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func rewriteTarget(m map[string]any, base *url.URL) error {
	raw, ok := m["webSocketDebuggerUrl"]
	if !ok {
		// A target another client is attached to has no URL; the
		// frontend link then cannot work either.
		return nil
	}
	s, ok := raw.(string)
	if !ok {
		return fmt.Errorf("discovery document from Chromium: webSocketDebuggerUrl is %T, not a string", raw)
	}
	public, err := PublicSocket(s, base)
	if err != nil {
		return err
	}
	m["webSocketDebuggerUrl"] = public.String()
	if _, ok := m["devtoolsFrontendUrl"]; ok {
		param := "ws"
		if public.Scheme == "wss" {
			param = "wss"
		}
		hostPath := public.Host + public.EscapedPath()
		if public.RawQuery != "" {
			hostPath += "?" + public.RawQuery
		}
		m["devtoolsFrontendUrl"] = strings.TrimSuffix(base.EscapedPath(), "/") + "/devtools/inspector.html?" + url.Values{param: {hostPath}}.Encode()
	}
	return nil
}

// PublicSocket maps one of Chromium's WebSocket URLs (its path under
// /devtools/) to the same socket under base.
func PublicSocket(chromium string, base *url.URL) (*url.URL, error) {
	u, err := url.Parse(chromium)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || !strings.HasPrefix(u.Path, "/devtools/") {
		return nil, fmt.Errorf("discovery document from Chromium: %q is not a DevTools WebSocket URL", chromium)
	}
	out := *base
	out.Path = strings.TrimSuffix(base.Path, "/") + u.Path
	out.RawPath = ""
	return &out, nil
}
