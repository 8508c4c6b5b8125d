package web

import (
	"fmt"
	"testing"
)

func TestViewerCaps(t *testing.T) {
	v := newViewerCount(0, 0)
	var releases []func()
	for i := range MaxViewersPerToken {
		r, err := v.open("d-1", "sig-a")
		if err != nil {
			t.Fatalf("viewer %d of a token: %v", i+1, err)
		}
		releases = append(releases, r)
	}
	if _, err := v.open("d-1", "sig-a"); err == nil {
		t.Fatalf("viewer %d of one token was let in", MaxViewersPerToken+1)
	}
	// Other tokens and the daemon's fill the desktop up to its cap.
	for i := MaxViewersPerToken; i < MaxViewersPerDesktop; i++ {
		token := fmt.Sprintf("sig-%d", i%3)
		if i%3 == 2 {
			token = "" // the daemon's
		}
		r, err := v.open("d-1", token)
		if err != nil {
			t.Fatalf("viewer %d of the desktop: %v", i+1, err)
		}
		releases = append(releases, r)
	}
	if _, err := v.open("d-1", ""); err == nil {
		t.Fatalf("viewer %d of one desktop was let in", MaxViewersPerDesktop+1)
	}
	if r, err := v.open("d-2", ""); err != nil {
		t.Fatalf("another desktop's viewer: %v", err)
	} else {
		r()
	}
	releases[0]()
	releases[0]() // twice is once
	if _, err := v.open("d-1", "sig-a"); err != nil {
		t.Fatalf("after one closed: %v", err)
	}
	if _, err := v.open("d-1", "sig-b"); err == nil {
		t.Fatal("a second release freed a second slot")
	}
}

// The caps are the configured ones when set (the flags).
func TestViewerCapsFromConfig(t *testing.T) {
	v := newViewerCount(2, 1)
	if _, err := v.open("d-1", "sig-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.open("d-1", "sig-a"); err == nil {
		t.Fatal("a second viewer of a token capped at 1 was let in")
	}
	if _, err := v.open("d-1", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := v.open("d-1", ""); err == nil {
		t.Fatal("a third viewer of a desktop capped at 2 was let in")
	}
}
