"""The API client's default rate limits: kube-scheduler's (`--kube-api-qps` 50, burst 100).

A module of their own so that choosing a backend (`kubedra.cluster.connect`) can name them
without importing the HTTP client."""

DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
