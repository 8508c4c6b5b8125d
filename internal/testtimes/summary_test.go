package main

import (
	"bytes"
	"strings"
	"testing"
)

const run = `{"Action":"start","Package":"example.com/a"}
{"Action":"run","Package":"example.com/a","Test":"TestQuick"}
{"Action":"output","Package":"example.com/a","Test":"TestQuick","Output":"=== RUN   TestQuick\n"}
{"Action":"output","Package":"example.com/a","Test":"TestQuick","Output":"    a_test.go:9: passing detail\n"}
{"Action":"pass","Package":"example.com/a","Test":"TestQuick","Elapsed":0.5}
{"Action":"run","Package":"example.com/a","Test":"TestSlow"}
{"Action":"output","Package":"example.com/a","Test":"TestSlow/case","Output":"    a_test.go:20: sub detail\n"}
{"Action":"pass","Package":"example.com/a","Test":"TestSlow/case","Elapsed":2}
{"Action":"output","Package":"example.com/a","Test":"TestSlow","Output":"    a_test.go:12: it broke\n"}
{"Action":"output","Package":"example.com/a","Test":"TestSlow","Output":"--- FAIL: TestSlow (3.00s)\n"}
{"Action":"fail","Package":"example.com/a","Test":"TestSlow","Elapsed":3}
{"Action":"output","Package":"example.com/a","Output":"FAIL\n"}
{"Action":"output","Package":"example.com/a","Output":"FAIL\texample.com/a\t3.6s\n"}
{"Action":"fail","Package":"example.com/a","Elapsed":3.6}
{"Action":"output","Package":"example.com/b","Output":"PASS\n"}
{"Action":"output","Package":"example.com/b","Output":"ok  \texample.com/b\t9.1s\n"}
{"Action":"pass","Package":"example.com/b","Elapsed":9.1}
go: a message that is not an event
`

func TestPrintsWhatGoTestPrintsThenTheTimes(t *testing.T) {
	s := newSummary()
	var out bytes.Buffer
	if err := s.read(strings.NewReader(run), &out); err != nil {
		t.Fatal(err)
	}
	s.print(&out, 1)
	got := out.String()
	for _, want := range []string{
		"    a_test.go:20: sub detail\n    a_test.go:12: it broke\n--- FAIL: TestSlow (3.00s)\n",
		"FAIL\texample.com/a\t3.6s\n",
		"ok  \texample.com/b\t9.1s\n",
		"go: a message that is not an event\n",
		"       9.1 s  pass example.com/b\n       3.6 s  fail example.com/a\n",
		"the 1 slowest tests\n       3.0 s  fail example.com/a TestSlow\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "passing detail") {
		t.Errorf("a passing test's lines were printed:\n%s", got)
	}
}

func FuzzLine(f *testing.F) {
	for _, l := range strings.Split(run, "\n") {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		s := newSummary()
		var out bytes.Buffer
		s.line(raw, &out)
		s.print(&out, 10)
	})
}
