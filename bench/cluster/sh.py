"""Running system commands (``ip``, ``tc``, ``sshd``, ``ssh-keygen``): a failure becomes a BenchError
naming the command and its first line of error output."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from .. import BenchError

SETUP_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "setup-cluster.sh"


def install_command() -> str:
    """The command that installs what the emulated cluster needs from the system."""
    return (f"bash {SETUP_SCRIPT}" if SETUP_SCRIPT.exists()
            else "apt-get install -y openssh-server iproute2 iptables libnetfilter-queue-dev gcc")


def which(cmd: str) -> str | None:
    """Path of ``cmd`` on PATH or in the sbin directories (root's tools are often not on a user's PATH)."""
    return shutil.which(cmd) or shutil.which(cmd, path="/usr/local/sbin:/usr/sbin:/sbin")


def run(args: Sequence[str], *, check: bool = True, timeout: float = 30, **kw) -> subprocess.CompletedProcess:
    """Run ``args`` (text output captured); raise BenchError if it fails and ``check``."""
    try:
        proc = subprocess.run(list(args), check=False, capture_output=True, text=True, timeout=timeout, **kw)
    except FileNotFoundError:
        raise BenchError(f"`{args[0]}` not found ({install_command()} installs what the emulated cluster needs)")
    except subprocess.TimeoutExpired:
        raise BenchError(f"`{' '.join(args)}` did not finish within {timeout:.0f} s")
    if check and proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip().splitlines()
        raise BenchError(f"`{' '.join(args)}` failed (exit {proc.returncode}): {err[0] if err else 'no output'}")
    return proc


def ok(args: Sequence[str], **kw) -> bool:
    """True if ``args`` exits 0 (errors are expected and ignored: clean-up of what may be gone)."""
    try:
        return run(args, check=False, **kw).returncode == 0
    except BenchError:
        return False


def in_netns(ns: str, args: Sequence[str]) -> list[str]:
    """``args`` run inside network namespace ``ns``."""
    return ["ip", "netns", "exec", ns, *args]
