"""Helpers of the notebook tests (``from notebook_support import execute, NotebookFailed``): papermill on a notebook of
the repository. The fixture run directories are made in conftest.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support import REPO


def execute(notebook: str, dest: Path, **parameters) -> dict:
    """papermill ``notebooks/<notebook>`` with ``parameters``; returns the executed notebook (JSON)."""
    out = dest / "notebooks" / notebook
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "papermill", "--no-progress-bar", str(REPO / "notebooks" / notebook), str(out)]
    for k, v in parameters.items():
        cmd += ["-p", k, str(v)] if not isinstance(v, (list, dict)) else ["-y", json.dumps({k: v})]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=str(REPO), timeout=600)
    if proc.returncode != 0:
        raise NotebookFailed(proc.stderr[-4000:])
    return json.loads(out.read_text())


class NotebookFailed(AssertionError):
    pass
