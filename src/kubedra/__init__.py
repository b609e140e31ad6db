"""kubedra: Kubernetes Dynamic Resource Allocation (resource.k8s.io/v1) in Python."""

__version__ = "0.1.0"
