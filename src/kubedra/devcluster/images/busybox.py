"""The busybox image (localhost/kubedra-busybox:1.35), the small test image: Debian's
busybox-static with links for the common applets. Its applet links and /etc (users, a
sticky /tmp) are also the kubedra image's shell and users."""

from __future__ import annotations

from kubedra.devcluster import oci
from kubedra.devcluster.images.cache import Cache, cache_key, cached_layer, scratch
from kubedra.devcluster.images.debian import Apt, extract
from kubedra.devcluster.images.host import ImageBuildError, Log
from kubedra.devcluster.images.recipe import ENV_PATH, Image

BUSYBOX_REFERENCE = "localhost/kubedra-busybox:1.35"
BUSYBOX_UPSTREAM = "1.35."  # the tag above is Debian bookworm's busybox, checked on build
APPLETS = (
    "[", "[[", "ash", "awk", "basename", "cat", "chmod", "chown", "cp", "cut", "date", "dd",
    "df", "dirname", "du", "echo", "egrep", "env", "expr", "false", "fgrep", "find", "free",
    "grep", "gunzip", "gzip", "head", "hostname", "id", "ip", "kill", "less", "ln", "ls",
    "mkdir", "mktemp", "more", "mount", "mv", "nc", "netstat", "nslookup", "printf", "ps",
    "pwd", "readlink", "realpath", "rm", "rmdir", "sed", "seq", "sh", "sleep", "sort", "stat",
    "tail", "tar", "tee", "test", "timeout", "top", "touch", "tr", "true", "umount", "uname",
    "uniq", "vi", "watch", "wc", "wget", "which", "whoami", "xargs", "yes", "zcat",
)  # fmt: skip
PASSWD = (
    "root:x:0:0:root:/root:/bin/sh\n"
    "nonroot:x:65532:65532:nonroot:/home/nonroot:/bin/false\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
)
GROUP = "root:x:0:\nnonroot:x:65532:\nnogroup:x:65534:\n"
NSSWITCH = "passwd: files\ngroup: files\nhosts: files dns\n"


def busybox_image(cache: Cache, log: Log) -> Image:
    """The test image: busybox-static, applet links, passwd and a /tmp."""
    ((pin, deb),) = Apt(cache.downloads / "apt", log).fetch(["busybox-static"])
    upstream = pin.version.split(":", 1)[-1]
    if not upstream.startswith(BUSYBOX_UPSTREAM):
        raise ImageBuildError(f"busybox-static {pin.version} is not {BUSYBOX_REFERENCE}'s")
    key = cache_key("busybox-layer", oci.sha256_file(deb))

    def entries() -> list[oci.Entry]:
        with scratch(cache) as work:
            extract(deb, work)
            binary = (work / "bin" / "busybox").read_bytes()
            copyright_ = (work / "usr/share/doc/busybox-static/copyright").read_bytes()
        return [
            oci.file("bin/busybox", binary, 0o755),
            *applet_links("bin"),
            oci.file("usr/share/doc/busybox-static/copyright", copyright_),
            *etc_files(),
        ]

    layer = cached_layer(cache, key, entries, f"busybox-static {pin.version}")
    config = oci.ImageConfig(cmd=("sh",), env=(ENV_PATH,))
    return Image(BUSYBOX_REFERENCE, (layer,), config)


def applet_links(folder: str) -> list[oci.Entry]:
    """`folder/APPLET -> busybox` for each common applet, and /usr/bin/env for shebangs."""
    links = [oci.symlink(f"{folder}/{applet}", "busybox") for applet in APPLETS]
    return [*links, oci.symlink("usr/bin/env", f"/{folder}/busybox")]


def etc_files() -> list[oci.Entry]:
    """Users (root, nonroot 65532 as the chart's scheduler runs, nobody), a sticky /tmp."""
    return [
        oci.file("etc/passwd", PASSWD.encode()),
        oci.file("etc/group", GROUP.encode()),
        oci.file("etc/nsswitch.conf", NSSWITCH.encode()),
        oci.directory("tmp", 0o1777),
        oci.directory("root", 0o700),
        oci.directory("home/nonroot", 0o755),
    ]
