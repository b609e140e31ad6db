"""A real Kubernetes control plane for development and tests, built from upstream modules."""
