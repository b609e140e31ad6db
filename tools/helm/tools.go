//go:build tools

// Package tools pins helm's CLI, built by `make render-deploy` into kubedra's cache.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
