"""A real node in the dev cluster: upstream's kubelet, containerd v2 and runc, in a network
and mount namespace of its own, its cgroups under one kubedra-owned subtree.

The node is a small machine inside this one. Its network namespace is joined to the host
by a veth pair (the node's address is the far end); inside it a bridge gives pods their
addresses (`kubedra-bridge`, the CNI plugin in `cni.py`), and one NAT rule plays
kube-proxy's part for the only Service the node needs: `kubernetes` (10.0.0.1:443) is
forwarded to the API server on the host, so in-cluster clients (the chart's driver and
scheduler) connect as on any cluster. Its mount namespace hides the host's /run, /var/lib
and /var/log behind empty ones, with the kubelet's and containerd's state bound in from the
cluster folder, so nothing is written to the host's /var/lib/kubelet, /var/log or CDI
folders, and the kubelet's kernel tunables are files of the node's own. `down` kills every
process of the subtree, removes the cgroups and the folder: nothing is left behind.

`host.py` is the host's side (start, stop, images), `agent.py` runs inside the namespaces
and supervises containerd and the kubelet, `layout.py` holds the paths, addresses and
configuration files, `cgroups.py` the subtree.
"""

from kubedra.devcluster.node.host import RealNode

__all__ = ["RealNode"]
