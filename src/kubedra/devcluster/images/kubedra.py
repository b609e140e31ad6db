"""kubedra's own image (localhost/kubedra:<version>), for the Helm chart.

Its root is "distroless": the dependency closure of Debian's python3.11-minimal and
libpython3.11-stdlib, unpacked with `dpkg-deb -x` (no maintainer scripts, no apt, dpkg or
perl), busybox-static as the shell operators `kubectl exec` into, the wheels pinned in
tools/images/requirements.lock and kubedra's wheel from this checkout, every .py
precompiled (unchecked-hash .pyc: the chart's root filesystem is read-only). matplotlib is
left out, so `kubedra sim` plots are not available in the image. Three layers: the Debian
base, the wheels, kubedra.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from kubedra.devcluster import oci
from kubedra.devcluster.images.busybox import applet_links, etc_files
from kubedra.devcluster.images.cache import (
    Cache,
    cache_key,
    cached_layer,
    layer_meta,
    scratch,
    used,
)
from kubedra.devcluster.images.debian import SUITE, Apt, Pin, extract, write_status
from kubedra.devcluster.images.host import (
    ImageBuildError,
    Log,
    checkout,
    pip,
    project_version,
    run,
)
from kubedra.devcluster.images.recipe import ENV_PATH, Image
from kubedra.devcluster.images.wheels import (
    PYTHON,
    SITE,
    compile_pyc,
    locked_wheels,
    unpack_wheel,
)

# The roots of the kubedra image's package closure: apt adds their dependencies.
KUBEDRA_PACKAGES = (
    "base-files",  # /etc/os-release: how CVE scanners tell which distribution this is
    "busybox-static",  # /bin/sh and the usual tools, one static binary
    "python3.11-minimal",
    "libpython3.11-stdlib",
    "libstdc++6",  # grpcio's and google-re2's extension modules link it
)
# Kept from /usr/share: licences (copyright files) and what a program reads at run time.
TRIMMED = (
    "usr/share/man", "usr/share/info", "usr/share/lintian", "usr/share/bug",
    "usr/share/gcc", "usr/share/gdb",  # libstdc++'s pretty-printers for gdb
)  # fmt: skip


def kubedra_image(cache: Cache, log: Log) -> Image:
    """kubedra's image: a Debian base layer, a wheels layer, a kubedra layer."""
    debs = Apt(cache.downloads / "apt", log).fetch(KUBEDRA_PACKAGES)
    base_key = cache_key("kubedra-base", [(p.name, p.version, oci.sha256_file(d)) for p, d in debs])
    root = _base_root(cache, base_key, debs, log)
    packages = ", ".join(f"{p.name}={p.version}" for p, _ in debs)
    base = cached_layer(cache, base_key, lambda: oci.tree(root), f"debian {SUITE}: {packages}")
    wheels = locked_wheels(cache, log)
    deps_key = cache_key("kubedra-deps", base_key, [oci.sha256_file(w) for w in wheels])
    source_key = _source_digest()
    app_key = cache_key("kubedra-app", base_key, source_key)
    with scratch(cache) as work:
        layers_missing = not (
            layer_meta(cache, deps_key).exists() and layer_meta(cache, app_key).exists()
        )
        tree_root = _work_root(root, work) if layers_missing else root
        deps = _deps_layer(cache, deps_key, tree_root, wheels, log)
        app = _app_layer(cache, app_key, tree_root, work, log)
    version = project_version()
    config = oci.ImageConfig(
        entrypoint=("/usr/bin/python3", "-m", "kubedra"),
        env=(ENV_PATH, "LANG=C.UTF-8", "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1"),
        user="0:0",
        labels={
            "org.opencontainers.image.title": "kubedra",
            "org.opencontainers.image.version": version,
        },
    )
    return Image(kubedra_reference(), (base, deps, app), config)


def kubedra_reference() -> str:
    """`localhost/kubedra:<version of this checkout>`."""
    return f"localhost/kubedra:{project_version()}"


def _base_root(cache: Cache, key: str, debs: Sequence[tuple[Pin, Path]], log: Log) -> Path:
    """The unpacked Debian root (with stdlib .pyc), made once per set of .debs."""
    root = cache.built / "roots" / key
    done = root.with_name(f"{key}.done")
    if done.exists():
        used(done)
        return root
    log(f"unpacking {len(debs)} Debian packages")
    shutil.rmtree(root, ignore_errors=True)
    with scratch(cache) as work:
        stage = work / "root"
        stage.mkdir(mode=0o755)
        for pin, deb in debs:
            extract(deb, stage)
            write_status(stage, pin, deb)
        _finish_base(stage)
        log(f"compiling the standard library ({PYTHON} in a chroot)")
        compile_pyc(stage, f"/usr/lib/{PYTHON}")
        root.parent.mkdir(parents=True, exist_ok=True)
        os.replace(stage, root)
    done.touch()
    return root


def _finish_base(root: Path) -> None:
    """What maintainer scripts and python3-minimal would add, less what is only docs."""
    for folder in TRIMMED:
        shutil.rmtree(root / folder, ignore_errors=True)
    docs = [d for d in (root / "usr/share/doc").iterdir() if d.is_dir() and not d.is_symlink()]
    for doc in sorted(item for d in docs for item in d.iterdir()):
        if doc.name == "copyright":
            continue
        if doc.is_dir() and not doc.is_symlink():
            shutil.rmtree(doc)
        else:
            doc.unlink()
    (root / "usr/bin/python3").symlink_to(PYTHON)
    for entry in [*applet_links("bin"), *etc_files()]:
        _materialize(root, entry)


def _materialize(root: Path, entry: oci.Entry) -> None:
    """Write an entry onto a host folder (to make a root that a chroot can run)."""
    path = root / entry.path
    path.parent.mkdir(parents=True, exist_ok=True)
    if entry.kind == "symlink":
        path.symlink_to(entry.target)
    elif entry.kind == "dir":
        path.mkdir(exist_ok=True)
        path.chmod(entry.mode)
    elif entry.kind == "file" and entry.data is not None:
        path.write_bytes(entry.data)
        path.chmod(entry.mode)
    else:
        raise ImageBuildError(f"{entry.path}: cannot write a {entry.kind} here")


def _work_root(base: Path, work: Path) -> Path:
    """A hardlinked copy of the cached base root to run the chroot in; the cache is never
    written (compileall replaces files, it does not write through links)."""
    target = work / "root"
    run(["cp", "-a", "-l", str(base), str(target)])
    return target


def _deps_layer(cache: Cache, key: str, root: Path, wheels: Sequence[Path], log: Log) -> oci.Layer:
    """The third-party wheels, unpacked into the site folder and precompiled."""

    def entries() -> list[oci.Entry]:
        site = root / SITE
        log(f"unpacking {len(wheels)} wheels")
        for wheel in wheels:
            unpack_wheel(wheel, site, drop_tests=True)
        log("compiling the wheels")
        compile_pyc(root, f"/{SITE}")
        return oci.tree(site, SITE)

    names = ", ".join(w.name.split("-")[0] + "-" + w.name.split("-")[1] for w in wheels)
    return cached_layer(cache, key, entries, f"wheels: {names}")


def _app_layer(cache: Cache, key: str, root: Path, work: Path, log: Log) -> oci.Layer:
    """kubedra's wheel from this checkout, precompiled, and /usr/local/bin/kubedra."""

    def entries() -> list[oci.Entry]:
        wheel = _kubedra_wheel(work, log)
        site = root / SITE
        tops = unpack_wheel(wheel, site)  # the layer takes these names only, not the deps
        compile_pyc(root, *(f"/{SITE}/{top}" for top in tops if (site / top).is_dir()))
        found = [e for top in tops for e in oci.tree(site / top, f"{SITE}/{top}")]
        script = "#!/usr/bin/python3\nfrom kubedra.cli.main import main\n\nmain()\n"
        return [*found, oci.file("usr/local/bin/kubedra", script.encode(), 0o755)]

    return cached_layer(cache, key, entries, f"kubedra {project_version()}")


def _kubedra_wheel(work: Path, log: Log) -> Path:
    """A wheel of the checkout, built from a copy (no build/ or egg-info in the tree)."""
    log("building kubedra's wheel")
    source = work / "source"
    for rel in _source_files():
        target = source / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(checkout() / rel, target)
    wheels = work / "wheel"
    pip(
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "--wheel-dir",
        str(wheels),
        str(source),
        env={"SOURCE_DATE_EPOCH": str(oci.EPOCH)},
    )
    (wheel,) = wheels.glob("kubedra-*.whl")
    return wheel


def _source_files() -> list[str]:
    """What goes into kubedra's wheel: pyproject.toml, README.md and src/ less caches."""
    root = checkout()
    found = ["pyproject.toml", "README.md"]
    for folder, dirs, files in os.walk(root / "src"):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.endswith(".egg-info"))
        found += [
            str(Path(folder, f).relative_to(root)) for f in sorted(files) if not f.endswith(".pyc")
        ]
    return found


def _source_digest() -> str:
    """The digest of kubedra's wheel inputs: the app layer's cache key."""
    digest = hashlib.sha256()
    for rel in _source_files():
        digest.update(f"{rel}\0".encode())
        digest.update(hashlib.sha256((checkout() / rel).read_bytes()).digest())
    return digest.hexdigest()
