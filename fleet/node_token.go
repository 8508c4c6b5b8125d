package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/warmdesk/warmdesk/internal/tokenfile"
)

// adoptToken makes the fleet's shared daemon token this host's (own, when
// this host is the first to ask), and keeps it in the token file for the
// CLI.
func (n *Node) adoptToken(ctx context.Context, own string) error {
	shared, err := SharedToken(ctx, n.client, n.prefix, own)
	if err != nil {
		return err
	}
	n.setToken(shared)
	if shared == own {
		return nil
	}
	if err := tokenfile.WriteWhole(n.cfg.TokenFile, []byte(shared+"\n")); err != nil {
		return fmt.Errorf("keep the fleet's token: %w", err)
	}
	return nil
}

// Token is the fleet's daemon token, which this host answers.
func (n *Node) Token() string {
	n.tokenMu.Lock()
	defer n.tokenMu.Unlock()
	return n.token
}

func (n *Node) setToken(tok string) {
	n.tokenMu.Lock()
	n.token = tok
	n.tokenMu.Unlock()
}

// RotateToken makes a new daemon token for the whole fleet, in etcd, if
// the token there is still the one this host has: every host, this one
// included, takes it from there (FollowToken). The API's check here takes
// it when this returns, and the token file is written at once too, for
// the caller to read.
func (n *Node) RotateToken() (string, error) {
	tok, old := tokenfile.New(), n.Token()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := SetSharedToken(ctx, n.client, n.prefix, old, tok); err != nil {
		return "", err
	}
	// Unless the watch has already brought a later rotation (from
	// another host), which this one must not undo.
	n.keepToken(old, tok)
	return tok, nil
}

// keepToken makes tok this host's fleet token, if it is still from (any
// token when from is empty), and writes it to the token file; a failed
// write is logged (the token holds all the same: the API checks it and
// the fleet has it).
func (n *Node) keepToken(from, tok string) {
	n.tokenMu.Lock()
	defer n.tokenMu.Unlock()
	if n.token == tok || (from != "" && n.token != from) {
		return
	}
	n.token = tok
	if err := tokenfile.WriteWhole(n.cfg.TokenFile, []byte(tok+"\n")); err != nil {
		n.log.Error("keep the fleet's rotated token in this host's token file: the CLI here needs it by hand", "err", err)
	}
}

// FollowToken takes the fleet's token each time any host rotates it:
// into the token file, the node, and adopt (the API's check, which
// ignores a token it has), until Close.
func (n *Node) FollowToken(adopt func(string)) {
	ctx, cancel := context.WithCancel(context.Background())
	n.mu.Lock()
	n.stopWatch = cancel
	n.mu.Unlock()
	go WatchToken(ctx, n.client, n.prefix, func(tok string) {
		n.keepToken("", tok)
		adopt(tok)
	})
}
