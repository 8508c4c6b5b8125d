package qemuvm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"os"
	"strconv"
)

// Screendump asks QEMU for a picture of the screen. QEMU writes it as a
// PPM file into dir (the machine's run directory), which is read and
// removed. The file is made here and given to owner, the user QEMU runs
// as: it opens the file by name, and cannot make files in dir itself.
func Screendump(ctx context.Context, ex Executor, dir string, owner Owner) (image.Image, error) {
	f, err := os.CreateTemp(dir, "screendump-*.ppm")
	if err != nil {
		return nil, fmt.Errorf("screendump: %w", err)
	}
	path := f.Name()
	f.Close()
	defer os.Remove(path)
	if err := owner.Give(path); err != nil {
		return nil, fmt.Errorf("screendump: give %s to the machine's user: %w", path, err)
	}
	if err := ex.Execute(ctx, "screendump", map[string]string{"filename": path}, nil); err != nil {
		return nil, fmt.Errorf("screendump: %w", err)
	}
	r, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("screendump: %w", err)
	}
	defer r.Close()
	img, err := DecodePPM(r)
	if err != nil {
		return nil, fmt.Errorf("screendump: %w", err)
	}
	return img, nil
}

// maxScreendumpPixels bounds a picture QEMU's screendump may claim to be.
const maxScreendumpPixels = 8192 * 8192

// DecodePPM reads the binary PPM (P6, maxval 255) that QMP screendump
// writes.
func DecodePPM(r io.Reader) (*image.RGBA, error) {
	br := bufio.NewReader(r)
	var fields [4]int
	magic, err := ppmToken(br)
	if err != nil {
		return nil, err
	}
	if magic != "P6" {
		return nil, fmt.Errorf("ppm: magic %q, want P6", magic)
	}
	for i := 1; i < 4; i++ {
		tok, err := ppmToken(br)
		if err != nil {
			return nil, err
		}
		n, err := strconv.Atoi(tok)
		if err != nil || n <= 0 || n > 65535 {
			return nil, fmt.Errorf("ppm: bad header value %q", tok)
		}
		fields[i] = n
	}
	w, h, maxval := fields[1], fields[2], fields[3]
	if maxval != 255 {
		return nil, fmt.Errorf("ppm: maxval %d, want 255", maxval)
	}
	if w*h > maxScreendumpPixels {
		return nil, fmt.Errorf("ppm: %dx%d is too large", w, h)
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	row := make([]byte, 3*w)
	for y := 0; y < h; y++ {
		if _, err := io.ReadFull(br, row); err != nil {
			return nil, fmt.Errorf("ppm: pixels: %w", err)
		}
		out := img.Pix[y*img.Stride:]
		for x := 0; x < w; x++ {
			out[4*x], out[4*x+1], out[4*x+2], out[4*x+3] = row[3*x], row[3*x+1], row[3*x+2], 0xff
		}
	}
	return img, nil
}

// ppmToken reads one whitespace-separated header token, skipping comments;
// the single whitespace byte after the last token is consumed with it.
func ppmToken(br *bufio.Reader) (string, error) {
	var tok bytes.Buffer
	for {
		c, err := br.ReadByte()
		if err != nil {
			return "", fmt.Errorf("ppm: header: %w", err)
		}
		switch {
		case c == '#' && tok.Len() == 0:
			if _, err := br.ReadString('\n'); err != nil {
				return "", fmt.Errorf("ppm: header: %w", err)
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if tok.Len() > 0 {
				return tok.String(), nil
			}
		default:
			if tok.Len() >= 16 {
				return "", errors.New("ppm: header token too long")
			}
			tok.WriteByte(c)
		}
	}
}
