#!/usr/bin/env bash
# Measure the two candidate bases of kubedra's image side by side (docs/decisions.md):
#   (i)  debootstrap --variant=minbase bookworm + python3, as a Debian image is usually made;
#   (ii) the distroless-style root of `python -m kubedra.devcluster.images kubedra`.
# Prints build time, unpacked and gzipped size, package count, whether apt/dpkg/perl are
# there, and runs kubedra in each (chroot). Needs root and Debian's mirror; leaves nothing
# behind but the image cache. Usage: tools/images/compare-bases.sh [PYTHON]
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${1:-.venv/bin/python}
work=$(mktemp -d /tmp/kubedra-bases.XXXXXX)
trap 'rm -rf "$work"' EXIT

size() {  # unpacked KiB, then the gzipped layer's MiB (written by kubedra's OCI writer)
    local kib; kib=$(du -s --apparent-size --block-size=1K "$1" | cut -f1)
    "$PY" - "$1" "$work/layer.tar.gz" "$kib" <<'PYEOF'
import sys
from pathlib import Path
from kubedra.devcluster import oci
layer = oci.write_layer(oci.tree(Path(sys.argv[1])), Path(sys.argv[2]))
print(f"unpacked {int(sys.argv[3]) / 1024:.1f} MiB, gzipped {layer.blob.size / 2**20:.1f} MiB")
PYEOF
}

check() {  # kubedra runs in the root: a shell, the native wheels, the CLI
    chroot "$1" /bin/sh -c 'echo shell ok'
    chroot "$1" python3 -c 'import grpc, re2, msgspec, numpy; print("imports ok")'
    /usr/bin/time -f "kubedra --help: %e s" chroot "$1" python3 -m kubedra --help >/dev/null
}

echo "== (ii) distroless-style (dpkg-deb -x of the closure), cold cache"
start=$(date +%s.%N)
KUBEDRA_CACHE="$work/cache" PIP_NO_CACHE_DIR=1 "$PY" -m kubedra.devcluster.images kubedra \
    --out "$work/kubedra.tar" 2>/dev/null | tail -1
echo "whole image, cold: $(echo "$(date +%s.%N) - $start" | bc) s"
base=$(ls -d "$work"/cache/images/built/roots/*/)
echo "base: $(size "$base"), $(ls "$base/var/lib/dpkg/status.d" | wc -l) packages"
for tool in apt-get dpkg perl bash; do
    [ -e "$base/usr/bin/$tool" ] && echo "  $tool: present" || echo "  $tool: absent"
done
mkdir "$work/ii"
"$PY" - "$work/kubedra.tar" "$work/ii" <<'PYEOF'
import json, sys, tarfile
archive = tarfile.open(sys.argv[1])
blob = lambda d: archive.extractfile("blobs/sha256/" + d.split(":")[1])
manifest = json.load(blob(json.load(archive.extractfile("index.json"))["manifests"][0]["digest"]))
for layer in manifest["layers"]:
    with tarfile.open(fileobj=blob(layer["digest"]), mode="r:gz") as tar:
        tar.extractall(sys.argv[2], filter="fully_trusted")
PYEOF
echo "image: $(size "$work/ii")"
check "$work/ii"

echo "== (i) debootstrap --variant=minbase bookworm + python3"
start=$(date +%s.%N)
debootstrap --variant=minbase --include=python3 bookworm "$work/i" http://deb.debian.org/debian \
    >"$work/debootstrap.log" 2>&1
echo "debootstrap: $(echo "$(date +%s.%N) - $start" | bc) s"
rm -rf "$work"/i/var/cache/apt/archives/*.deb "$work"/i/var/lib/apt/lists/* "$work"/i/dev/*
echo "base: $(size "$work/i"), $(chroot "$work/i" dpkg-query -W | wc -l) packages"
for tool in apt-get dpkg perl bash; do
    chroot "$work/i" sh -c "command -v $tool >/dev/null" && echo "  $tool: present" || echo "  $tool: absent"
done
rm -rf "$work"/i/usr/share/{doc,man,info,locale}
echo "base less doc, man, info, locale: $(size "$work/i")"
cp -a "$work/ii/usr/local/lib/python3.11/dist-packages" "$work/i/usr/local/lib/python3.11/"
check "$work/i"
