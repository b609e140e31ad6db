"""Generated protobuf/gRPC modules of the kubelet's DRA and plugin-registration APIs.

See README.md in this directory; regenerate with `python -m kubedra.driver.proto.generate`.
"""
