"""Fixtures for every folder of tests/ (a folder's own are in its conftest.py); the helpers test modules import are in
support.py (this file's folder is on the path because pytest loads this file)."""

from __future__ import annotations

import pytest

from support import bench_cli


@pytest.fixture
def bench():
    return bench_cli
