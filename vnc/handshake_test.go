package vnc

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
)

// Literal server streams for the client handshake, shared with the fuzz
// seeds.
var (
	// QEMU's ServerInit: 720x400, 32 bpp depth 24 little-endian BGRX, "QEMU".
	wireServerInitQEMU = []byte{
		0x02, 0xd0, 0x01, 0x90,
		32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0,
		0, 0, 0, 4, 'Q', 'E', 'M', 'U',
	}
	wireHandshake38None = cat(
		[]byte("RFB 003.008\n"),
		[]byte{1, 1},       // one security type: None
		[]byte{0, 0, 0, 0}, // SecurityResult OK
		wireServerInitQEMU,
	)
	wireHandshake38VNCAuth = cat(
		[]byte("RFB 003.008\n"),
		[]byte{1, 2},
		testChallenge,
		[]byte{0, 0, 0, 0},
		wireServerInitQEMU,
	)
	wireHandshake33VNCAuth = cat(
		[]byte("RFB 003.003\n"),
		[]byte{0, 0, 0, 2},
		testChallenge,
		[]byte{0, 0, 0, 0},
		wireServerInitQEMU,
	)
	wireHandshake37None = cat(
		[]byte("RFB 003.007\n"),
		[]byte{2, 16, 1},   // Tight and None
		wireServerInitQEMU, // no SecurityResult for None in 3.7
	)
	wireHandshake38AuthFailed = cat(
		[]byte("RFB 003.008\n"),
		[]byte{1, 2},
		testChallenge,
		[]byte{0, 0, 0, 1, 0, 0, 0, 21}, []byte("Authentication failed"),
	)
	wireHandshake38Refused = cat(
		[]byte("RFB 003.008\n"),
		[]byte{0, 0, 0, 0, 7}, []byte("go away"),
	)
)

// The VNC Authentication answer for "secret" to testChallenge, computed
// with OpenSSL's DES-ECB on the bit-reversed key.
const secretResponseHex = "752440ee2bfcc2a0d9013fd20371e23b"

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func runClientHandshake(t *testing.T, server []byte, password string) (ServerInit, []byte, error) {
	t.Helper()
	var out bytes.Buffer
	si, err := clientHandshake(bytes.NewReader(server), &out, password, Limits{}.withDefaults())
	return si, out.Bytes(), err
}

func TestVNCAuthResponseKnownAnswer(t *testing.T) {
	got := hex.EncodeToString(vncAuthResponse(testChallenge, "secret"))
	if got != secretResponseHex {
		t.Fatalf("response %s, want %s", got, secretResponseHex)
	}
	// Only the first 8 bytes of a password count.
	if a, b := vncAuthResponse(testChallenge, "12345678"), vncAuthResponse(testChallenge, "123456789"); !bytes.Equal(a, b) {
		t.Fatal("password bytes past the eighth changed the response")
	}
}

func TestClientHandshake38None(t *testing.T) {
	si, out, err := runClientHandshake(t, wireHandshake38None, "")
	if err != nil {
		t.Fatal(err)
	}
	want := cat([]byte("RFB 003.008\n"), []byte{1}, []byte{1}) // version, None, shared
	if !bytes.Equal(out, want) {
		t.Fatalf("client sent %q, want %q", out, want)
	}
	wantInit := ServerInit{Width: 720, Height: 400, Name: "QEMU", PixelFormat: PixelFormat{
		BitsPerPixel: 32, Depth: 24, TrueColour: true, RedMax: 255, GreenMax: 255, BlueMax: 255, RedShift: 16, GreenShift: 8,
	}}
	if si != wantInit {
		t.Fatalf("server init %+v, want %+v", si, wantInit)
	}
}

func TestClientHandshake38VNCAuth(t *testing.T) {
	_, out, err := runClientHandshake(t, wireHandshake38VNCAuth, "secret")
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := hex.DecodeString(secretResponseHex)
	want := cat([]byte("RFB 003.008\n"), []byte{2}, resp, []byte{1})
	if !bytes.Equal(out, want) {
		t.Fatalf("client sent %x, want %x", out, want)
	}
}

func TestClientHandshake33VNCAuth(t *testing.T) {
	_, out, err := runClientHandshake(t, wireHandshake33VNCAuth, "secret")
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := hex.DecodeString(secretResponseHex)
	want := cat([]byte("RFB 003.003\n"), resp, []byte{1}) // no security choice in 3.3
	if !bytes.Equal(out, want) {
		t.Fatalf("client sent %x, want %x", out, want)
	}
}

func TestClientHandshake37NoneHasNoSecurityResult(t *testing.T) {
	si, out, err := runClientHandshake(t, wireHandshake37None, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := cat([]byte("RFB 003.007\n"), []byte{1, 1}); !bytes.Equal(out, want) {
		t.Fatalf("client sent %q, want %q", out, want)
	}
	if si.Width != 720 {
		t.Fatalf("server init %+v", si)
	}
}

func TestClientHandshakeNewerServerGets38(t *testing.T) {
	server := cat([]byte("RFB 004.001\n"), wireHandshake38None[12:])
	_, out, err := runClientHandshake(t, server, "")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out, []byte("RFB 003.008\n")) {
		t.Fatalf("client answered %q", out)
	}
}

func TestClientHandshakeFailures(t *testing.T) {
	tests := []struct {
		name     string
		server   []byte
		password string
		wantErr  error
		wantText string
	}{
		{"auth failed with reason", wireHandshake38AuthFailed, "wrong", ErrAuthFailed, "Authentication failed"},
		{"refused with reason", wireHandshake38Refused, "", ErrProtocol, "go away"},
		{"password needed", wireHandshake38VNCAuth, "", ErrAuthFailed, "requires a vnc password"},
		{"password needed 3.3", wireHandshake33VNCAuth, "", ErrAuthFailed, "requires a vnc password"},
		{"no usable security", cat([]byte("RFB 003.008\n"), []byte{1, 19}), "", ErrUnsupported, "security types"},
		{"bad version", []byte("RFB 03.0008\n"), "", ErrProtocol, "protocol version"},
		{"ancient version", []byte("RFB 002.000\n"), "", ErrProtocol, "older than 3.3"},
		{"huge reason", cat([]byte("RFB 003.008\n"), []byte{0, 0xff, 0xff, 0xff, 0xff}), "", ErrProtocol, "over the limit"},
		{"huge name", cat(wireHandshake38None[:len(wireHandshake38None)-8], []byte{0x7f, 0xff, 0xff, 0xff}), "", ErrProtocol, "name of"},
		{"huge framebuffer", cat([]byte("RFB 003.008\n"), []byte{1, 1, 0, 0, 0, 0}, []byte{0xff, 0xff, 0xff, 0xff}, wireServerInitQEMU[4:]), "", ErrProtocol, "framebuffer 65535x65535"},
		{"bad pixel format", cat([]byte("RFB 003.008\n"), []byte{1, 1, 0, 0, 0, 0}, wireServerInitQEMU[:4], []byte{24}, wireServerInitQEMU[5:]), "", ErrProtocol, "bits per pixel"},
		{"truncated", wireHandshake38None[:30], "", io.ErrUnexpectedEOF, "server init"},
		{"empty", nil, "", io.EOF, "protocol version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runClientHandshake(t, tt.server, tt.password)
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantText) {
				t.Fatalf("error %v, want %v containing %q", err, tt.wantErr, tt.wantText)
			}
		})
	}
}

// Literal viewer streams for the proxy's server-side handshake.
var (
	wireViewer38None = cat([]byte("RFB 003.008\n"), []byte{1}, []byte{1})
	wireViewer33     = cat([]byte("RFB 003.003\n"), []byte{0})
)

func runAcceptViewer(t *testing.T, viewer []byte, password string) (int, []byte, error) {
	t.Helper()
	var out bytes.Buffer
	minor, err := acceptViewer(bytes.NewReader(viewer), &out, password, Limits{}.withDefaults())
	return minor, out.Bytes(), err
}

func TestAcceptViewer38None(t *testing.T) {
	minor, out, err := runAcceptViewer(t, wireViewer38None, "")
	if err != nil || minor != 8 {
		t.Fatalf("minor %d, err %v", minor, err)
	}
	if want := cat([]byte("RFB 003.008\n"), []byte{1, 1}, []byte{0, 0, 0, 0}); !bytes.Equal(out, want) {
		t.Fatalf("server sent %q, want %q", out, want)
	}
}

func TestAcceptViewer33None(t *testing.T) {
	minor, out, err := runAcceptViewer(t, wireViewer33, "")
	if err != nil || minor != 3 {
		t.Fatalf("minor %d, err %v", minor, err)
	}
	// 3.3: the server names the type as a u32, and None has no result.
	if want := cat([]byte("RFB 003.008\n"), []byte{0, 0, 0, 1}); !bytes.Equal(out, want) {
		t.Fatalf("server sent %q, want %q", out, want)
	}
}

// challengeCapture answers the proxy's random challenge as a viewer would.
type challengeCapture struct {
	version  string
	choice   []byte
	password string
	out      bytes.Buffer
	pending  bytes.Buffer
}

func (c *challengeCapture) Write(p []byte) (int, error) {
	c.out.Write(p)
	if len(p) == 16 { // the challenge
		c.pending.Write(vncAuthResponse(p, c.password))
		c.pending.WriteByte(1) // ClientInit
	}
	return len(p), nil
}

func (c *challengeCapture) Read(p []byte) (int, error) {
	if c.version != "" {
		n := copy(p, c.version)
		c.version = c.version[n:]
		if c.version == "" {
			c.pending.Write(c.choice)
		}
		return n, nil
	}
	return c.pending.Read(p)
}

func TestAcceptViewerVNCAuth(t *testing.T) {
	for _, version := range []string{"RFB 003.008\n", "RFB 003.007\n", "RFB 003.003\n"} {
		var choice []byte
		if version != "RFB 003.003\n" {
			choice = []byte{2}
		}
		for _, password := range []string{"letmein", "wrong"} {
			c := &challengeCapture{version: version, choice: choice, password: password}
			_, err := acceptViewer(c, c, "letmein", Limits{}.withDefaults())
			out := c.out.Bytes()
			if password == "letmein" {
				if err != nil {
					t.Fatalf("%q: %v", version, err)
				}
				if !bytes.HasSuffix(out, []byte{0, 0, 0, 0}) {
					t.Fatalf("%q: no SecurityResult OK in %x", version, out)
				}
				continue
			}
			if !errors.Is(err, ErrAuthFailed) {
				t.Fatalf("%q wrong password: error %v", version, err)
			}
			wantTail := []byte{0, 0, 0, 1}
			if version == "RFB 003.008\n" {
				wantTail = cat(wantTail, []byte{0, 0, 0, 21}, []byte("authentication failed"))
			}
			if !bytes.HasSuffix(out, wantTail) {
				t.Fatalf("%q: failure %x, want suffix %x", version, out, wantTail)
			}
		}
	}
}

func TestAcceptViewerFailures(t *testing.T) {
	tests := []struct {
		name     string
		viewer   []byte
		wantErr  error
		wantText string
	}{
		{"wrong security choice", cat([]byte("RFB 003.008\n"), []byte{2}), ErrProtocol, "chose security type 2"},
		{"garbage version", []byte("GET / HTTP/1.1\r\n"), ErrProtocol, "protocol version"},
		{"hang up", []byte("RFB 003.008\n"), io.EOF, "security type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runAcceptViewer(t, tt.viewer, "")
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantText) {
				t.Fatalf("error %v, want %v containing %q", err, tt.wantErr, tt.wantText)
			}
		})
	}
}

func TestServerInitRoundTrip(t *testing.T) {
	si, err := readServerInit(bytes.NewReader(wireServerInitQEMU), Limits{}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	if got := appendServerInit(nil, si); !bytes.Equal(got, wireServerInitQEMU) {
		t.Fatalf("re-encoded %x, want %x", got, wireServerInitQEMU)
	}
}
