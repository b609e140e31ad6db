"""kubedra's controllers: what kube-controller-manager does for DRA beyond the claim
controller (which the scheduler does on the embedded store), over the Store protocol."""
