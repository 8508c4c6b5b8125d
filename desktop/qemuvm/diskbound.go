package qemuvm

import (
	"context"
	"fmt"
)

// WriteThresholdEvent is the event QEMU sends, once, when a write reaches
// past a node's write threshold.
const WriteThresholdEvent = "BLOCK_WRITE_THRESHOLD"

// ProtocolNode names the node that reads and writes the file at path
// (driver "file"): where a threshold bounds the file's size, not the
// guest's offsets.
func ProtocolNode(ctx context.Context, ex Executor, path string) (string, error) {
	nodes, err := fileNodes(ctx, ex)
	if err != nil {
		return "", err
	}
	node, ok := nodes[path]
	if !ok {
		return "", fmt.Errorf("no file node open on %s", path)
	}
	return node, nil
}

// FileOpen says whether QEMU has the file at path open as a block node.
func FileOpen(ctx context.Context, ex Executor, path string) (bool, error) {
	nodes, err := fileNodes(ctx, ex)
	_, ok := nodes[path]
	return ok, err
}

// fileNodes maps each file QEMU has open as a block node to its node's
// name.
func fileNodes(ctx context.Context, ex Executor) (map[string]string, error) {
	var nodes []struct {
		NodeName string `json:"node-name"`
		Driver   string `json:"drv"`
		File     string `json:"file"`
	}
	if err := ex.Execute(ctx, "query-named-block-nodes", map[string]any{"flat": true}, &nodes); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, n := range nodes {
		if n.Driver == "file" {
			out[n.File] = n.NodeName
		}
	}
	return out, nil
}

// SetWriteThreshold asks QEMU for WriteThresholdEvent once a write on node
// reaches past offset bytes.
func SetWriteThreshold(ctx context.Context, ex Executor, node string, bytes int64) error {
	return ex.Execute(ctx, "block-set-write-threshold", map[string]any{"node-name": node, "write-threshold": bytes}, nil)
}

// BoundFile asks QEMU for WriteThresholdEvent once the file at path (a
// disk's top overlay) grows past mib MiB.
func BoundFile(ctx context.Context, ex Executor, path string, mib int) error {
	node, err := ProtocolNode(ctx, ex, path)
	if err != nil {
		return fmt.Errorf("disk bound: %w", err)
	}
	if err := SetWriteThreshold(ctx, ex, node, int64(mib)<<20); err != nil {
		return fmt.Errorf("disk bound: %w", err)
	}
	return nil
}

// DiskFullReason is why a desktop paused itself at its disk bound.
func DiskFullReason(mib int) string {
	return fmt.Sprintf("disk_full: the desktop's disk grew to its bound of %d MiB (disk_mib) and the desktop paused; delete it, or resume it to let the guest free space (it pauses again at its next write past the bound)", mib)
}
