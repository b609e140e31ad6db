//go:build tools

// The real node's container runtime: containerd v2 (CDI is built in: the kubelet passes a
// claim's CDI device ids to it through the CRI), its CLI, and the runc shim. runc itself is
// Debian's.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
