package movestream

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// receive applies every frame of a stream to dst and returns the kinds
// it saw that were not disk frames.
func receive(t *testing.T, stream []byte, dst *os.File) []Kind {
	t.Helper()
	r := NewReader(bytes.NewReader(stream))
	var other []Kind
	for {
		fr, err := r.Read()
		if err == io.EOF {
			return other
		}
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if fr.Kind == Disk || fr.Kind == DiskSize {
			if err := ApplyDisk(dst, fr); err != nil {
				t.Fatal(err)
			}
			continue
		}
		other = append(other, fr.Kind)
	}
}

func TestDiskPassesLeaveTheReceiverEqual(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 40*ChunkSize+123)
	for i := 0; i < 10*ChunkSize; i++ { // the rest stays zeros, as a sparse overlay's tail
		data[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	dst, err := os.Create(filepath.Join(dir, "dst"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	var p DiskPasses
	var buf bytes.Buffer
	w := NewWriter(&buf)
	sent1, err := p.Send(src, w)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(Start, 0, nil)
	w.Flush()
	if got := receive(t, buf.Bytes(), dst); len(got) != 1 || got[0] != Start {
		t.Fatalf("other frames %q, want the one Start", got)
	}
	if want := int64(10 * ChunkSize); sent1 != want {
		t.Errorf("first pass sent %d bytes, want %d (the chunks of zeros left out)", sent1, want)
	}

	// The guest writes on: one chunk changed, one zeroed, one filled, and
	// the file grown.
	data[3*ChunkSize+7] ^= 0xff
	clear(data[5*ChunkSize : 6*ChunkSize])
	data[20*ChunkSize] = 1
	data = append(data, bytes.Repeat([]byte{9}, 1000)...)
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	sent2, err := p.Send(src, w)
	if err != nil {
		t.Fatal(err)
	}
	w.Flush()
	receive(t, buf.Bytes(), dst)
	if sent2 >= int64(5*ChunkSize) {
		t.Errorf("second pass sent %d bytes: more than the four chunks that changed", sent2)
	}
	got, _ := os.ReadFile(dst.Name())
	if !bytes.Equal(got, data) {
		t.Fatalf("the receiver's copy differs from the file after the last pass")
	}

	// A pass over an unchanged file sends no data.
	buf.Reset()
	if sent3, err := p.Send(src, w); err != nil || sent3 != 0 {
		t.Errorf("pass over an unchanged file: %d bytes, %v", sent3, err)
	}
}

func TestLongDataIsSplitAndACutFrameIsSaid(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	big := bytes.Repeat([]byte{7}, MaxFrame+10)
	if _, err := w.StateWriter().Write(big); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	r := NewReader(bytes.NewReader(buf.Bytes()))
	var total int
	for {
		fr, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil || fr.Kind != State {
			t.Fatalf("frame %q: %v", fr.Kind, err)
		}
		total += len(fr.Data)
	}
	if total != len(big) {
		t.Fatalf("read %d bytes of state, wrote %d", total, len(big))
	}
	cut := NewReader(bytes.NewReader(buf.Bytes()[:100]))
	if _, err := cut.Read(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a frame cut short: %v, want io.ErrUnexpectedEOF", err)
	}
	bad := NewReader(bytes.NewReader(append([]byte{'X'}, make([]byte, 12)...)))
	if _, err := bad.Read(); !errors.Is(err, ErrBadFrame) {
		t.Fatalf("an unknown kind: %v, want ErrBadFrame", err)
	}
}

func FuzzReader(f *testing.F) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.Write(Disk, 4096, []byte("abc"))
	w.Write(Commit, 0, []byte(`{"x":1}`))
	w.Flush()
	f.Add(buf.Bytes())
	f.Add([]byte{'D', 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(bytes.NewReader(b))
		for i := 0; i < 100; i++ {
			fr, err := r.Read()
			if err != nil {
				return
			}
			if len(fr.Data) > MaxFrame {
				t.Fatalf("frame of %d bytes", len(fr.Data))
			}
		}
	})
}
