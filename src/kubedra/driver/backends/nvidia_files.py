"""The NVIDIA driver's user-space files a GPU container needs, found on the node.

A container sees a GPU through its device nodes and the driver's libraries, which must be
the node's own (they match its kernel module). NVIDIA's container toolkit mounts them from
the host; kubedra's CDI specs do the same on the NVML backend, so a plain runc runs GPU
containers without NVIDIA's runtime hook. The names are those NVIDIA's CDI generator
mounts for compute containers: the libraries by their SONAME (a bind mount follows the
symlink to the versioned file) and the utilities operators use inside (nvidia-smi, MPS).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

LIBRARY_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib/x86_64-linux-gnu")
LIBRARIES = (
    "libcuda.so.1",
    "libcudadebugger.so.1",
    "libnvidia-ml.so.1",
    "libnvidia-ptxjitcompiler.so.1",
    "libnvidia-nvvm.so.4",
    "libnvidia-gpucomp.so",
    "libnvidia-allocator.so.1",
    "libnvidia-cfg.so.1",
    "libnvidia-opencl.so.1",
)
BINARY_DIRS = ("/usr/bin", "/usr/local/bin")
BINARIES = (
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
)


def driver_files(root: Path = Path("/")) -> tuple[str, ...]:
    """The driver's files present under `root`, as paths on the node (the first directory
    that has a file wins)."""
    return tuple(
        found
        for names, dirs in ((LIBRARIES, LIBRARY_DIRS), (BINARIES, BINARY_DIRS))
        for name in names
        if (found := _first(root, dirs, name)) is not None
    )


def _first(root: Path, dirs: Sequence[str], name: str) -> str | None:
    for folder in dirs:
        if (root / folder.lstrip("/") / name).exists():
            return f"{folder}/{name}"
    return None
