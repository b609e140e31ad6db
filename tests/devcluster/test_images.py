"""The OCI writer and the node's images: valid layout, byte-for-byte reproducible, runnable.

The pause image needs gcc; busybox needs Debian's mirror; kubedra's image needs the mirror
and PyPI, and root for its chroot checks (CI has all four). Downloads are shared with the
user's cache (~/.cache/kubedra/images/downloads); "from scratch" builds use a fresh folder
for everything built, so they prove that the same inputs give the same bytes.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

from kubedra.devcluster import images, oci
from kubedra.devcluster.images import cache as image_cache

REPO = Path(__file__).resolve().parents[2]


def reachable(host: str, port: int) -> bool:
    """Whether a registry answers at all (CI and this machine reach Debian and PyPI)."""
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError:
        return False
    return True


needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
needs_debian = pytest.mark.skipif(
    shutil.which("apt-get") is None or not reachable("deb.debian.org", 80),
    reason="apt-get or Debian's mirror is not available",
)
needs_pypi = pytest.mark.skipif(not reachable("pypi.org", 443), reason="PyPI is not reachable")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chroot checks need root")
CHROOT = shutil.which("chroot") or "/usr/sbin/chroot"


def fresh(tmp_path: Path) -> images.Cache:
    """Everything built anew in tmp_path; downloads from the shared cache."""
    return images.Cache(images.Cache.default().downloads, tmp_path / "built")


# --- reading an archive back, checking every digest --------------------------------------


def blob(archive: tarfile.TarFile, descriptor: dict[str, Any]) -> bytes:
    """A blob's bytes, after checking its digest, size and name."""
    algorithm, hexdigest = descriptor["digest"].split(":")
    assert algorithm == "sha256"
    member = archive.extractfile(f"blobs/sha256/{hexdigest}")
    assert member is not None
    data = member.read()
    assert hashlib.sha256(data).hexdigest() == hexdigest
    assert len(data) == descriptor["size"]
    return data


def validate(path: Path) -> dict[str, Any]:
    """Check an OCI archive from index to layers; returns what a test asserts more on."""
    with tarfile.open(path) as archive:
        names = archive.getnames()
        assert names == sorted(names, key=lambda n: n.split("/"))
        assert json.loads(archive.extractfile("oci-layout").read()) == {  # type: ignore[union-attr]
            "imageLayoutVersion": "1.0.0"
        }
        index = json.loads(archive.extractfile("index.json").read())  # type: ignore[union-attr]
        assert index["schemaVersion"] == 2 and index["mediaType"] == oci.INDEX_TYPE
        (descriptor,) = index["manifests"]
        assert descriptor["mediaType"] == oci.MANIFEST_TYPE
        assert descriptor["platform"] == {"architecture": "amd64", "os": "linux"}
        manifest = json.loads(blob(archive, descriptor))
        assert manifest["mediaType"] == oci.MANIFEST_TYPE
        assert manifest["config"]["mediaType"] == oci.CONFIG_TYPE
        config = json.loads(blob(archive, manifest["config"]))
        layers = []
        for layer in manifest["layers"]:
            assert layer["mediaType"] == oci.LAYER_TYPE
            compressed = blob(archive, layer)
            assert compressed[3] == 0, "gzip header: no name, no flags"
            assert compressed[4:8] == b"\0\0\0\0", "gzip header: mtime 0"
            layers.append(gzip.decompress(compressed))
        diff_ids = [f"sha256:{hashlib.sha256(raw).hexdigest()}" for raw in layers]
        assert config["rootfs"] == {"type": "layers", "diff_ids": diff_ids}
        assert len(config["history"]) == len(layers)
        assert (config["architecture"], config["os"]) == ("amd64", "linux")
        blobs = {n for n in names if n.startswith("blobs/sha256/")}
        assert len(blobs) == 2 + len({layer["digest"] for layer in manifest["layers"]})
    return {"descriptor": descriptor, "config": config, "layers": layers}


def check_layer(raw: bytes) -> list[tarfile.TarInfo]:
    """A layer's tar: sorted, parents first, nothing of the host's (owner, names, times)."""
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        members = tar.getmembers()
    seen: set[str] = set()
    for member in members:
        assert (member.uid, member.gid, member.uname, member.gname) == (0, 0, "", "")
        assert member.mtime == oci.EPOCH
        parent = os.path.dirname(member.name)
        assert not parent or parent in seen, f"{member.name} before its folder"
        seen.add(member.name)
    names = [m.name for m in members]
    assert names == sorted(names, key=lambda n: n.split("/"))
    return members


def unpack(path: Path, root: Path) -> None:
    """Apply an archive's layers in order onto a folder (what a snapshotter does)."""
    with tarfile.open(path) as archive:
        index = json.loads(archive.extractfile("index.json").read())  # type: ignore[union-attr]
        manifest = json.loads(blob(archive, index["manifests"][0]))
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=io.BytesIO(blob(archive, layer)), mode="r:gz") as tar:
                tar.extractall(root, filter="fully_trusted")


# --- the writer --------------------------------------------------------------------------


def sample_entries(tmp_path: Path) -> list[oci.Entry]:
    host = tmp_path / "host.bin"
    host.write_bytes(b"\x7fELF from the host")
    return [
        oci.file("/usr/bin/tool", host, 0o755),
        oci.file("etc/config", b"a = 1\n"),
        oci.symlink("bin/sh", "busybox"),
        oci.directory("tmp", 0o1777),
    ]


def test_layer_is_the_same_bytes_whatever_the_order_and_the_day(tmp_path: Path) -> None:
    entries = sample_entries(tmp_path)
    first = oci.write_layer(entries, tmp_path / "a.tar.gz")
    os.utime(tmp_path / "host.bin", (0, 0))  # host times never reach the layer
    second = oci.write_layer(list(reversed(entries)), tmp_path / "b.tar.gz")
    assert (tmp_path / "a.tar.gz").read_bytes() == (tmp_path / "b.tar.gz").read_bytes()
    assert first.blob.digest == second.blob.digest == oci.sha256_file(tmp_path / "a.tar.gz")
    raw = gzip.decompress((tmp_path / "a.tar.gz").read_bytes())
    assert first.diff_id == f"sha256:{hashlib.sha256(raw).hexdigest()}"
    members = {m.name: m for m in check_layer(raw)}
    assert set(members) == {"bin", "bin/sh", "etc", "etc/config", "tmp", "usr", "usr/bin",
                            "usr/bin/tool"}  # fmt: skip
    assert members["usr/bin/tool"].mode == 0o755 and members["tmp"].mode == 0o1777
    assert members["bin/sh"].issym() and members["bin/sh"].linkname == "busybox"


def test_a_path_given_twice_or_escaping_is_refused(tmp_path: Path) -> None:
    with pytest.raises(oci.ImageError, match="given twice"):
        oci.write_layer([oci.file("a", b"1"), oci.file("/a", b"2")], tmp_path / "l.tar.gz")
    with pytest.raises(oci.ImageError, match=r"'\.\.'"):
        oci.file("../etc/passwd", b"")


def test_tree_keeps_links_and_modes_and_drops_setuid(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/python3.11").write_bytes(b"python")
    os.link(root / "usr/bin/python3.11", root / "usr/bin/python3.11-again")
    (root / "usr/bin/python3").symlink_to("python3.11")
    (root / "usr/bin/su").write_bytes(b"su")
    (root / "usr/bin/su").chmod(0o4755)
    layer = oci.write_layer(oci.tree(root), tmp_path / "tree.tar.gz")
    members = {m.name: m for m in check_layer(gzip.decompress(layer.blob.path.read_bytes()))}
    assert members["usr/bin/python3.11-again"].islnk()
    assert members["usr/bin/python3.11-again"].linkname == "usr/bin/python3.11"
    assert members["usr/bin/python3"].linkname == "python3.11"
    assert members["usr/bin/su"].mode == 0o755
    again = oci.write_layer(oci.tree(root), tmp_path / "again.tar.gz")
    assert again.blob.digest == layer.blob.digest


def test_archive_is_valid_oci_and_reproducible(tmp_path: Path) -> None:
    layer = oci.write_layer(sample_entries(tmp_path), tmp_path / "layer.tar.gz", "sample")
    config = oci.ImageConfig(entrypoint=("/usr/bin/tool",), cmd=("--help",), user="1:1")
    digest = oci.write_archive(tmp_path / "one.tar", "localhost/sample:1.0", [layer], config)
    again = oci.write_archive(tmp_path / "two.tar", "localhost/sample:1.0", [layer], config)
    assert digest == again
    assert (tmp_path / "one.tar").read_bytes() == (tmp_path / "two.tar").read_bytes()
    found = validate(tmp_path / "one.tar")
    assert found["descriptor"]["digest"] == digest
    assert found["descriptor"]["annotations"] == {
        "io.containerd.image.name": "localhost/sample:1.0",
        "org.opencontainers.image.ref.name": "1.0",
    }
    assert found["config"]["config"]["Entrypoint"] == ["/usr/bin/tool"]
    assert found["config"]["config"]["Cmd"] == ["--help"]
    assert found["config"]["config"]["User"] == "1:1"
    assert found["config"]["created"] == oci.CREATED
    assert found["config"]["history"] == [{"created": oci.CREATED, "created_by": "sample"}]


def test_tag_of_a_reference() -> None:
    assert oci.tag("localhost:5000/team/kubedra:0.1.0") == "0.1.0"
    assert oci.tag("localhost/kubedra") == "latest"


def test_wheel_unpacks_like_an_install_without_scripts_or_tests(tmp_path: Path) -> None:
    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("demo/__init__.py", "")
        archive.writestr("demo/tests/test_demo.py", "")
        tool = zipfile.ZipInfo("demo/bin/tool")
        tool.external_attr = 0o100755 << 16
        archive.writestr(tool, "#!/bin/sh\n")
        archive.writestr("demo-1.0.data/purelib/demo_extra.py", "")
        archive.writestr("demo-1.0.data/scripts/demo", "#!python\n")
        archive.writestr("demo-1.0.dist-info/METADATA", "Name: demo\n")
    site = tmp_path / "site"
    tops = images.unpack_wheel(wheel, site, drop_tests=True)
    assert tops == ["demo", "demo-1.0.dist-info", "demo_extra.py"]
    found = sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.is_file())
    assert found == ["demo-1.0.dist-info/METADATA", "demo/__init__.py", "demo/bin/tool",
                     "demo_extra.py"]  # fmt: skip
    assert (site / "demo/bin/tool").stat().st_mode & 0o777 == 0o755
    assert (site / "demo/__init__.py").stat().st_mode & 0o777 == 0o644


def test_the_lock_covers_the_runtime_dependencies() -> None:
    """A dependency added to pyproject.toml must reach the image: rerun --write-lock."""
    with (REPO / "pyproject.toml").open("rb") as handle:
        wanted = tomllib.load(handle)["project"]["dependencies"]
    names = {re.split(r"[ ;<>=!~\[]", r, maxsplit=1)[0].lower().replace("_", "-") for r in wanted}
    locked = {line.split("==")[0] for line in images.lock_path().read_text().splitlines()
              if line and not line.startswith("#")}  # fmt: skip
    assert names - {"matplotlib"} <= locked, "python -m kubedra.devcluster.images --write-lock"
    assert all("--hash=sha256:" in line for line in images.lock_path().read_text().splitlines()
               if line and not line.startswith("#"))  # fmt: skip


def test_cache_keys_cover_every_module_of_the_image_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edit to any module of the package (or to the OCI writer) builds anew."""
    package = Path(images.__file__).parent
    code = image_cache.code_files()
    assert set(code) == {*package.glob("*.py"), Path(oci.__file__)}
    copies = []
    for module in code:
        copies.append(tmp_path / module.name)
        shutil.copy(module, copies[-1])
    monkeypatch.setattr(image_cache, "code_files", lambda: copies)
    before = image_cache.cache_key("layer", 1)
    assert image_cache.cache_key("layer", 1) == before != image_cache.cache_key("layer", 2)
    (tmp_path / "debian.py").write_text((tmp_path / "debian.py").read_text() + "\n# edited\n")
    assert image_cache.cache_key("layer", 1) != before


def test_command_line_needs_an_image_name() -> None:
    command = [sys.executable, "-W", "error", "-m", "kubedra.devcluster.images"]
    helped = subprocess.run([*command, "--help"], capture_output=True, text=True)
    assert helped.returncode == 0, helped.stderr
    assert "built without a registry or a container engine" in helped.stdout
    assert "{busybox,kubedra,pause}" in helped.stdout
    unnamed = subprocess.run(command, capture_output=True, text=True)
    assert unnamed.returncode == 2 and "error: name an image" in unnamed.stderr


# --- pause --------------------------------------------------------------------------------


@needs_gcc
def test_pause_builds_the_same_bytes_twice_and_stops_on_sigterm(tmp_path: Path) -> None:
    first = images.build("pause", tmp_path / "one.tar", fresh(tmp_path / "a"))
    second = images.build("pause", tmp_path / "two.tar", fresh(tmp_path / "b"))
    assert first.reference == images.PAUSE_REFERENCE == "localhost/kubedra-pause:3.10"
    assert first.digest == second.digest
    assert (tmp_path / "one.tar").read_bytes() == (tmp_path / "two.tar").read_bytes()
    found = validate(first.archive)
    assert found["config"]["config"]["Entrypoint"] == ["/pause"]
    (pause,) = [m for m in check_layer(found["layers"][0]) if m.isfile()]
    assert pause.name == "pause" and pause.mode == 0o755
    unpack(first.archive, tmp_path / "root")
    binary = str(tmp_path / "root/pause")
    version = subprocess.run([binary, "-v"], capture_output=True, text=True, check=True)
    assert version.stdout.strip() == "kubedra-pause 3.10"
    process = subprocess.Popen([binary], stderr=subprocess.PIPE)
    time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=5) == 0


# --- busybox ------------------------------------------------------------------------------


@needs_debian
def test_busybox_builds_the_same_bytes_twice_with_working_applets(tmp_path: Path) -> None:
    first = images.build("busybox", tmp_path / "one.tar", fresh(tmp_path / "a"))
    second = images.build("busybox", tmp_path / "two.tar", fresh(tmp_path / "b"))
    assert first.reference == "localhost/kubedra-busybox:1.35"
    assert first.digest == second.digest
    assert (tmp_path / "one.tar").read_bytes() == (tmp_path / "two.tar").read_bytes()
    found = validate(first.archive)
    assert found["config"]["config"]["Cmd"] == ["sh"]
    members = {m.name: m for m in check_layer(found["layers"][0])}
    assert members["bin/sh"].linkname == "busybox" and members["tmp"].mode == 0o1777
    root = tmp_path / "root"
    unpack(first.archive, root)
    listed = subprocess.run([root / "bin/busybox", "--list"], capture_output=True, text=True)
    assert set(images.APPLETS) <= set(listed.stdout.split()), "an applet busybox lacks"
    if os.geteuid() == 0:
        shell = subprocess.run([CHROOT, root, "/bin/sh", "-c", "echo ok; ls /bin | wc -l"],
                               capture_output=True, text=True, check=True)  # fmt: skip
        assert shell.stdout.split() == ["ok", str(len(images.APPLETS) + 1)]


# --- kubedra ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kubedra_image(tmp_path_factory: pytest.TempPathFactory) -> images.Built:
    """kubedra's image from the user's cache (cold: ~30 s, warm: ~2 s)."""
    return images.build("kubedra", tmp_path_factory.mktemp("kubedra") / "kubedra.tar")


@needs_debian
@needs_pypi
def test_kubedra_image_layout(kubedra_image: images.Built) -> None:
    found = validate(kubedra_image.archive)
    assert kubedra_image.reference == f"localhost/kubedra:{images.project_version()}"
    config = found["config"]["config"]
    assert config["Entrypoint"] == ["/usr/bin/python3", "-m", "kubedra"]
    assert config["User"] == "0:0"
    base, deps, app = (
        {m.name: m for m in check_layer(raw)} for raw in found["layers"]
    )  # fmt: skip
    assert "usr/bin/python3.11" in base and "bin/sh" in base
    assert not {"usr/bin/apt-get", "usr/bin/dpkg", "usr/bin/perl", "bin/bash"} & set(base)
    assert "var/lib/dpkg/status.d/libpython3.11-stdlib" in base  # for CVE scanners
    assert f"{images.SITE}/numpy/__init__.py" in deps
    assert not any(n.startswith(f"{images.SITE}/kubedra/") for n in deps)
    assert f"{images.SITE}/kubedra/__main__.py" in app and "usr/local/bin/kubedra" in app
    assert any(n.endswith(".cpython-311.pyc") for n in app), "kubedra is precompiled"
    assert not any(n.startswith(f"{images.SITE}/numpy/") for n in app)


@needs_debian
@needs_pypi
@needs_root
def test_kubedra_runs_in_its_image(kubedra_image: images.Built, tmp_path: Path) -> None:
    root = tmp_path / "root"
    unpack(kubedra_image.archive, root)

    def run(*command: str) -> str:
        done = subprocess.run([CHROOT, str(root), *command], capture_output=True, text=True,
                              env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert run("/bin/sh", "-c", "echo ok") == "ok\n"
    assert "Usage: kubedra" in run("python3", "-m", "kubedra", "--help")
    assert "Usage: kubedra" in run("/usr/local/bin/kubedra", "--help")
    assert run("python3", "-c", "import grpc, re2, msgspec, numpy, yaml; print('ok')") == "ok\n"
    assert "driver run" in run(
        "python3", "-m", "kubedra", "--in-cluster", "driver", "run", "--help"
    )


@needs_debian
@needs_pypi
@needs_root
def test_kubedra_image_from_scratch_is_the_same_bytes(
    kubedra_image: images.Built, tmp_path: Path
) -> None:
    """Every root, layer and wheel rebuilt in an empty folder: the same archive."""
    again = images.build("kubedra", tmp_path / "again.tar", fresh(tmp_path))
    assert again.digest == kubedra_image.digest
    assert again.archive.read_bytes() == kubedra_image.archive.read_bytes()
