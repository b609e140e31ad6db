"""A small, reproducible OCI image writer: layers, config, manifest, archive.

There is no container engine and no registry on the machines that build kubedra's images,
so the images are written here directly as OCI image-layout archives, the format that
`ctr -n k8s.io images import X.tar` loads. Everything is byte-for-byte deterministic: the
same entries give the same layer digest, the same layers and config the same manifest
digest, on any day. That holds because every variable a tar or gzip writer would take from
the host is fixed here: entries are sorted, owners are 0:0 with no names, every mtime is
`EPOCH`, the gzip header has mtime 0 and no file name, and JSON is written with sorted keys
and no spaces. The zlib library is the one input left to the host (its output for a given
level is stable across machines in practice, and "same inputs, same digest" is the claim).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any, Literal, Protocol, cast

from kubedra.errors import KubedraError

EPOCH = 315532800  # 1980-01-01T00:00:00Z: every file's mtime, and the config's `created`
CREATED = "1980-01-01T00:00:00Z"
GZIP_LEVEL = 6  # zlib's default: level 9 is ~2x slower for ~1% smaller layers
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
NAME_ANNOTATION = "io.containerd.image.name"
REF_ANNOTATION = "org.opencontainers.image.ref.name"
_CHUNK = 1 << 20

Kind = Literal["file", "dir", "symlink", "hardlink"]


class ImageError(KubedraError):
    """An image cannot be written as asked (a bad path, an unsupported file type)."""


@dataclass(frozen=True)
class Entry:
    """One path in a layer: a file (from bytes or a host file), a directory, or a link.

    `target` is a symlink's target as written, or a hardlink's path in the same layer.
    """

    path: str
    kind: Kind
    mode: int = 0o644
    data: bytes | None = None
    source: Path | None = None
    target: str = ""

    def size(self) -> int:
        """Bytes of content (0 for anything but a file)."""
        if self.kind != "file":
            return 0
        if self.data is not None:
            return len(self.data)
        assert self.source is not None
        return self.source.stat().st_size


def file(path: str, content: bytes | Path, mode: int = 0o644) -> Entry:
    """A regular file with the given bytes, or a host file's bytes read when written."""
    if isinstance(content, Path):
        return Entry(_clean(path), "file", mode, source=content)
    return Entry(_clean(path), "file", mode, data=content)


def directory(path: str, mode: int = 0o755) -> Entry:
    """A directory (parents of other entries are added as 0755 when not given)."""
    return Entry(_clean(path), "dir", mode)


def symlink(path: str, target: str) -> Entry:
    """A symbolic link; `target` is kept as written (relative or absolute)."""
    return Entry(_clean(path), "symlink", 0o777, target=target)


def tree(root: Path, into: str = "/") -> list[Entry]:
    """Every file, directory and symlink under a host folder, placed at `into` in the image.

    Owners and times on the host are ignored (see the module's docstring); setuid and
    setgid bits are dropped, since every file is owned by root in the image. Files that
    share an inode become hardlinks to the first of them in layer order, as on the host.
    """
    found: list[tuple[str, Path]] = []
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            host = Path(folder, name)
            found.append((_clean(f"{into}/{host.relative_to(root).as_posix()}"), host))
    found.sort(key=lambda item: _sort_key(item[0]))
    first_of: dict[tuple[int, int], str] = {}
    return [_host_entry(path, host, first_of) for path, host in found]


def _host_entry(path: str, host: Path, first_of: dict[tuple[int, int], str]) -> Entry:
    """One walked host path as an entry (hardlinks resolved through `first_of`)."""
    st = host.lstat()
    mode = stat.S_IMODE(st.st_mode) & ~(stat.S_ISUID | stat.S_ISGID)
    if stat.S_ISLNK(st.st_mode):
        return symlink(path, os.readlink(host))
    if stat.S_ISDIR(st.st_mode):
        return directory(path, mode)
    if not stat.S_ISREG(st.st_mode):
        raise ImageError(f"{host}: only files, directories and symlinks go into a layer")
    if st.st_nlink > 1:
        inode = (st.st_dev, st.st_ino)
        if inode in first_of:
            return Entry(path, "hardlink", mode, target=first_of[inode])
        first_of[inode] = path
    return file(path, host, mode)


@dataclass(frozen=True)
class Blob:
    """A content-addressed file: what a descriptor in the manifest or index points to."""

    path: Path
    digest: str
    size: int
    media_type: str

    def descriptor(self) -> dict[str, Any]:
        """The OCI descriptor of this blob."""
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


@dataclass(frozen=True)
class Layer:
    """A gzipped layer blob and the digest of its uncompressed tar (the config's diff_id)."""

    blob: Blob
    diff_id: str
    created_by: str = ""

    def to_json(self) -> dict[str, Any]:
        """What a cache keeps to reuse this layer without rewriting it."""
        return {
            "path": str(self.blob.path),
            "digest": self.blob.digest,
            "size": self.blob.size,
            "diff_id": self.diff_id,
            "created_by": self.created_by,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Layer:
        """The inverse of `to_json`."""
        blob = Blob(Path(data["path"]), data["digest"], data["size"], LAYER_TYPE)
        return Layer(blob, data["diff_id"], data.get("created_by", ""))


@dataclass(frozen=True)
class ImageConfig:
    """The runtime part of an image config (what a Dockerfile's ENV, ENTRYPOINT... set)."""

    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[str, ...] = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",)
    working_dir: str = "/"
    user: str = ""
    labels: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The `config` object of the image config, leaving out what is empty."""
        body: dict[str, Any] = {"Env": list(self.env), "WorkingDir": self.working_dir}
        if self.entrypoint:
            body["Entrypoint"] = list(self.entrypoint)
        if self.cmd:
            body["Cmd"] = list(self.cmd)
        if self.user:
            body["User"] = self.user
        if self.labels:
            body["Labels"] = dict(self.labels)
        return body


def write_layer(entries: Iterable[Entry], dest: Path, created_by: str = "") -> Layer:
    """Write the entries as a gzipped tar at `dest`; returns its digests.

    The tar is streamed through both hashes at once, so a large layer is never held in
    memory. `dest` is replaced atomically: a cache never sees half a layer.
    """
    ordered = _with_parents(entries)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=dest.parent, prefix=".layer-", delete=False) as raw:
        try:
            compressed = _Hashing(raw)
            with gzip.GzipFile(
                filename="", mode="wb", fileobj=compressed, compresslevel=GZIP_LEVEL, mtime=0
            ) as gz:
                plain = _Hashing(gz)
                _write_tar(ordered, plain)
            raw.flush()
            os.fsync(raw.fileno())
        except BaseException:
            os.unlink(raw.name)
            raise
    os.replace(raw.name, dest)
    blob = Blob(dest, compressed.digest(), compressed.count, LAYER_TYPE)
    return Layer(blob, plain.digest(), created_by)


def write_archive(out: Path, reference: str, layers: Sequence[Layer], config: ImageConfig) -> str:
    """Write an OCI image-layout archive of one linux/amd64 image; returns the manifest digest.

    `reference` is the full name containerd gives the image on import
    (`localhost/kubedra-pause:3.10`); its tag also goes in `org.opencontainers.image.ref.name`.
    """
    config_bytes = canonical_json(image_config(layers, config))
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": _bytes_descriptor(config_bytes, CONFIG_TYPE),
        "layers": [layer.blob.descriptor() for layer in layers],
    }
    manifest_bytes = canonical_json(manifest)
    manifest_desc = _bytes_descriptor(manifest_bytes, MANIFEST_TYPE)
    manifest_desc["platform"] = {"architecture": "amd64", "os": "linux"}
    manifest_desc["annotations"] = {NAME_ANNOTATION: reference, REF_ANNOTATION: tag(reference)}
    index = {"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": [manifest_desc]}
    entries = [
        file("oci-layout", canonical_json({"imageLayoutVersion": "1.0.0"})),
        file("index.json", canonical_json(index)),
        _blob_entry(config_bytes),
        _blob_entry(manifest_bytes),
        *(_layer_entry(layer) for layer in layers),
    ]
    _write_plain_tar(_with_parents(_unique(entries)), out)
    return str(manifest_desc["digest"])


def image_config(layers: Sequence[Layer], config: ImageConfig) -> dict[str, Any]:
    """The image config document: platform, runtime config, diff_ids, one history per layer."""
    return {
        "architecture": "amd64",
        "os": "linux",
        "created": CREATED,
        "config": config.to_json(),
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
        "history": [
            {"created": CREATED, "created_by": layer.created_by or "kubedra.devcluster.oci"}
            for layer in layers
        ],
    }


def canonical_json(value: Any) -> bytes:
    """JSON with sorted keys and no spaces: the same document always hashes the same."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def tag(reference: str) -> str:
    """The tag of `name:tag` (a digest-only or untagged reference gets `latest`)."""
    name = reference.rsplit("/", 1)[-1]
    return name.split(":", 1)[1] if ":" in name else "latest"


def sha256_file(path: Path) -> str:
    """`sha256:<hex>` of a host file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def _bytes_descriptor(data: bytes, media_type: str) -> dict[str, Any]:
    """A descriptor of in-memory bytes."""
    return {
        "mediaType": media_type,
        "digest": f"sha256:{hashlib.sha256(data).hexdigest()}",
        "size": len(data),
    }


def _blob_entry(data: bytes) -> Entry:
    """`blobs/sha256/<hex>` holding in-memory bytes."""
    return file(f"blobs/sha256/{hashlib.sha256(data).hexdigest()}", data)


def _layer_entry(layer: Layer) -> Entry:
    """`blobs/sha256/<hex>` holding a layer written to disk."""
    return file(f"blobs/sha256/{layer.blob.digest.split(':', 1)[1]}", layer.blob.path)


def _unique(entries: list[Entry]) -> list[Entry]:
    """Drop repeated blobs (two identical layers are one blob in the archive)."""
    seen: dict[str, Entry] = {}
    for entry in entries:
        seen.setdefault(entry.path, entry)
    return list(seen.values())


def _clean(path: str) -> str:
    """`/usr//bin/` -> `usr/bin`: relative, normalized, never escaping the root."""
    parts = [p for p in PurePosixPath("/", path).parts[1:] if p not in ("", ".")]
    if ".." in parts:
        raise ImageError(f"{path!r}: '..' is not allowed in a path in an image")
    return "/".join(parts)


def _sort_key(path: str) -> tuple[str, ...]:
    """Order by path components: a folder's entries follow it, together."""
    return tuple(path.split("/"))


def _with_parents(entries: Iterable[Entry]) -> list[Entry]:
    """Entries sorted, every missing parent folder added (0755), duplicates refused."""
    by_path: dict[str, Entry] = {}
    for entry in entries:
        if not entry.path:
            continue  # the root itself is never an entry
        if entry.path in by_path:
            raise ImageError(f"{entry.path}: given twice in one layer")
        by_path[entry.path] = entry
    for path in list(by_path):
        parent = PurePosixPath(path).parent
        while str(parent) != "." and str(parent) not in by_path:
            by_path[str(parent)] = directory(str(parent))
            parent = parent.parent
    return sorted(by_path.values(), key=lambda e: _sort_key(e.path))


def _tarinfo(entry: Entry) -> tarfile.TarInfo:
    """A tar header with nothing from the host: root owner, no names, fixed mtime."""
    info = tarfile.TarInfo(entry.path)
    info.mode = entry.mode
    info.mtime = EPOCH
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if entry.kind == "dir":
        info.type = tarfile.DIRTYPE
    elif entry.kind == "symlink":
        info.type, info.linkname = tarfile.SYMTYPE, entry.target
    elif entry.kind == "hardlink":
        info.type, info.linkname = tarfile.LNKTYPE, entry.target
    else:
        info.size = entry.size()
    return info


def _write_tar(entries: Sequence[Entry], sink: _Hashing) -> None:
    """Write a PAX tar of the (already ordered) entries to the sink."""
    stream = cast(IO[bytes], sink)  # tarfile only calls write() and tell()
    with tarfile.TarFile(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            info = _tarinfo(entry)
            if entry.kind != "file":
                tar.addfile(info)
            elif entry.data is not None:
                tar.addfile(info, io.BytesIO(entry.data))
            else:
                assert entry.source is not None
                with entry.source.open("rb") as handle:
                    tar.addfile(info, handle)


def _write_plain_tar(entries: Sequence[Entry], out: Path) -> None:
    """An uncompressed deterministic tar at `out`, replaced atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=out.parent, prefix=".archive-", delete=False) as raw:
        try:
            _write_tar(entries, _Hashing(raw))
        except BaseException:
            os.unlink(raw.name)
            raise
    os.chmod(raw.name, 0o644)
    os.replace(raw.name, out)


class _Writable(Protocol):
    """Anything with write(): a file, a gzip stream, another _Hashing."""

    def write(self, data: bytes, /) -> int:
        """Write all of `data`."""
        ...


class _Hashing:
    """A write-only stream that hashes and counts what passes through to `sink`."""

    def __init__(self, sink: _Writable) -> None:
        self.sink = sink
        self.hash = hashlib.sha256()
        self.count = 0

    def write(self, data: bytes) -> int:
        """Hash, count, forward."""
        self.hash.update(data)
        self.count += len(data)
        self.sink.write(data)
        return len(data)

    def tell(self) -> int:
        """tarfile asks where the stream starts."""
        return self.count

    def flush(self) -> None:
        """gzip flushes its sink on close."""

    def digest(self) -> str:
        """`sha256:<hex>` of everything written."""
        return f"sha256:{self.hash.hexdigest()}"
