"""The Helm chart in `deploy/helm/kubedra`, rendered to plain manifests (`make render-deploy`).

Rendering is `helm template` of the checkout's chart with helm built from its Go module
(`gotool.HELM`), so it needs no network and no helm installed: only the cached binary (or Go
to build it once). Helm runs with its config, cache and data homes in a temporary
directory, so no repository list or plugin of the user's changes the output.

    python -m kubedra.devcluster.deploy [--set KEY=VALUE ...]   # manifests on stdout
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kubedra.devcluster.binaries import KUBERNETES_VERSION, modules_dir
from kubedra.devcluster.gotool import HELM
from kubedra.errors import KubedraError

RELEASE = "kubedra"
NAMESPACE = "kubedra"


def chart_dir() -> Path:
    return modules_dir().parents[1] / "deploy" / "helm" / "kubedra"


def render(values: Sequence[str] = (), namespace: str = NAMESPACE) -> str:
    """The chart's manifests with `values` (`KEY=VALUE`, helm's `--set`) over its defaults.
    As plain manifests for `kubectl apply` they carry their Namespace (Helm would make it),
    unless `values` say otherwise."""
    values = ["namespace.create=true", *values]
    helm = HELM.build()
    with tempfile.TemporaryDirectory(prefix="kubedra-helm-") as home:
        env = {
            **os.environ,
            "HELM_CONFIG_HOME": f"{home}/config",
            "HELM_CACHE_HOME": f"{home}/cache",
            "HELM_DATA_HOME": f"{home}/data",
        }
        done = subprocess.run(
            [
                str(helm),
                "template",
                RELEASE,
                str(chart_dir()),
                f"--namespace={namespace}",
                f"--kube-version={KUBERNETES_VERSION}",
                *(f"--set={value}" for value in values),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    if done.returncode != 0:
        raise KubedraError(f"helm template {chart_dir()}: {done.stderr.strip()}")
    return done.stdout


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render deploy/helm/kubedra to manifests.")
    parser.add_argument("--set", dest="values", action="append", default=[], metavar="KEY=VAL")
    parser.add_argument("--namespace", default=NAMESPACE)
    args = parser.parse_args(argv)
    try:
        sys.stdout.write(render(args.values, args.namespace))
    except KubedraError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
