package cpupressure

import (
	"testing"
	"time"
)

func TestParsePSI(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "some avg10=15.93 avg60=48.45 avg300=47.75 total=18401238094\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", want: 18401238094 * time.Microsecond},
		// Kernels before 5.13 have no full line for the CPU.
		{in: "some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n", want: 7 * time.Microsecond},
		{in: "full avg10=0.00 total=5\n", bad: true},
		{in: "some avg10=1.00\n", bad: true},
		{in: "some total=-3\n", bad: true},
		{in: "some total=99999999999999999999\n", bad: true},
		{in: "", bad: true},
	} {
		got, err := ParsePSI([]byte(c.in))
		if c.bad != (err != nil) || got != c.want {
			t.Errorf("ParsePSI(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.bad)
		}
	}
}

func TestParseLoadavgAndShare(t *testing.T) {
	load, err := ParseLoadavg([]byte("4.08 5.52 3.80 3/172 8310\n"))
	if err != nil || load != 4.08 {
		t.Fatalf("ParseLoadavg = %v, %v", load, err)
	}
	for _, bad := range []string{"", "x 1 2", "-1 0 0"} {
		if _, err := ParseLoadavg([]byte(bad)); err == nil {
			t.Errorf("ParseLoadavg(%q) took it", bad)
		}
	}
	for _, c := range []struct {
		load float64
		cpus int
		want float64
	}{{1, 2, 0}, {2, 2, 0}, {4, 2, 0.5}, {8, 2, 0.75}, {3, 0, 0}} {
		if got := LoadShare(c.load, c.cpus); got != c.want {
			t.Errorf("LoadShare(%v, %d) = %v, want %v", c.load, c.cpus, got, c.want)
		}
	}
}

func FuzzParsePSI(f *testing.F) {
	f.Add([]byte("some avg10=15.93 avg60=48.45 avg300=47.75 total=18401238094\nfull avg10=0.00 total=0\n"))
	f.Add([]byte("some total=\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParsePSI(data)
		if err == nil && d < 0 {
			t.Fatalf("negative stall %v from %q", d, data)
		}
		if load, err := ParseLoadavg(data); err == nil && (load < 0 || LoadShare(load, 2) > 1) {
			t.Fatalf("load %v from %q", load, data)
		}
	})
}
