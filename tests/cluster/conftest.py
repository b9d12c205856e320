"""Fixtures of the emulated-cluster tests (one ``cluster_ready``); their helpers are in cluster_support.py."""

from __future__ import annotations

import subprocess

import pytest

from cluster_support import REPO, cluster


@pytest.fixture(scope="module")
def cluster_ready():
    """For a module of cluster tests (named in its ``usefixtures``): the system packages, no cluster before, none
    after."""
    subprocess.run(["bash", str(REPO / "scripts" / "setup-cluster.sh")], check=True, timeout=900)
    cluster("down")
    yield
    cluster("down", check=False)
