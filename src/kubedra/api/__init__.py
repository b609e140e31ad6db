"""Typed models and value types of the Kubernetes resource API."""
