// Command testtimes reads `go test -json` on standard input and prints
// what plain `go test` prints (each package's ok or FAIL line, and the
// output of the tests that failed), then a timing summary: every package's
// time and the ten slowest tests, so the next slowdown is seen the day it
// lands. scripts/test pipes the whole suite through it.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
)

func main() {
	s := newSummary()
	if err := s.read(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
		os.Exit(1)
	}
	s.print(os.Stdout, 10)
}

// read feeds every line of in to the summary, echoing what go test would
// print to out as it comes.
func (s *summary) read(in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		s.line(sc.Bytes(), out)
	}
	return sc.Err()
}
