"""`python -m kubedra.devcluster.images NAME [--out PATH]`: build an image archive and print
its reference last (`--refresh` first fetches Debian's lists again; `--write-lock` rewrites
tools/images/requirements.lock instead)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from kubedra.devcluster import images
from kubedra.errors import KubedraError


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m kubedra.devcluster.images NAME [--out PATH]`; the reference is printed last."""
    parser = argparse.ArgumentParser(
        prog="python -m kubedra.devcluster.images",
        description=images.__doc__.split("\n\n")[0] if images.__doc__ else "",
    )
    parser.add_argument(
        "name", nargs="?", choices=sorted(images.RECIPES), help="the image to build"
    )
    parser.add_argument("--out", type=Path, help="the archive to write (default: the cache)")
    parser.add_argument(
        "--refresh",
        action="store_true",
        help="fetch Debian's package lists again first (newer packages give a new digest)",
    )
    parser.add_argument(
        "--write-lock",
        action="store_true",
        help="rewrite tools/images/requirements.lock from this environment",
    )
    args = parser.parse_args(argv)
    try:
        if args.write_lock:
            images.write_lock()
            return 0
        if args.name is None:
            parser.error("name an image")
        if args.refresh:
            images.refresh()
        built = images.build(args.name, args.out)
    except KubedraError as error:
        sys.stderr.write(f"error: {error}\n")
        return 1
    print(f"archive: {built.archive}")
    print(f"digest: {built.digest}")
    print(built.reference)
    return 0


if __name__ == "__main__":
    sys.exit(main())
