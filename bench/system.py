"""Hardware and software profile of a run (``system.json``)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from .layout import REPO_ROOT


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_gib() -> float | None:
    try:
        import psutil

        return round(psutil.virtual_memory().total / 2**30, 1)
    except Exception:
        return None


def horovodrun_path() -> str:
    local = Path(sys.executable).parent / "horovodrun"
    return str(local) if local.exists() else (shutil.which("horovodrun") or "horovodrun")


def horovodrun_launch() -> list[str]:
    """How the suite starts horovodrun for a job: ``python -m bench.launch.horovodrun`` (horovodrun, its per-launch
    build question answered from :func:`horovod_build`'s record: about 1 s less of every job's start)."""
    return [sys.executable, "-m", "bench.launch.horovodrun"]


def _cache_dir() -> Path:
    return Path(os.environ.get("BENCH_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "distbench")


def check_build_cache() -> Path | None:
    """Where :func:`horovod_build` keeps its answer for the installed Horovod build: keyed by the path and
    modification time of its compiled library, found without importing it (importing horovod.torch imports torch);
    None where there is no Horovod."""
    try:
        import importlib.util

        lib = Path(importlib.util.find_spec("horovod.torch").origin).parent
        stamp = max((f.stat().st_mtime_ns for f in lib.glob("mpi_lib*")), default=lib.stat().st_mtime_ns)
    except Exception:
        return None
    return _cache_dir() / f"check-build-{hashlib.sha256(f'{lib}:{stamp}'.encode()).hexdigest()[:16]}.json"


@functools.lru_cache(maxsize=1)
def horovod_build() -> dict:
    """``horovodrun --check-build`` parsed: which frameworks, controllers and tensor operations are built in.

    The check takes seconds (it imports every framework), so its result is cached on disk per
    installed Horovod build (:func:`check_build_cache`)."""
    cache = check_build_cache()
    if cache is not None and cache.is_file():
        try:
            return json.loads(cache.read_text())
        except ValueError:
            pass
    try:
        out = subprocess.run([horovodrun_path(), "--check-build"], capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": str(e)}
    m = re.search(r"Horovod v([\w.]+)", out)
    built = {name.strip(): mark == "X" for mark, name in re.findall(r"\[(X| )\] ([\w .-]+)", out)}
    result = {"version": m.group(1) if m else None, "available": built}
    if cache is not None and m:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(result))
            os.replace(tmp, cache)
        except OSError:
            pass
    return result


def git_record() -> dict:
    """The commit of the checkout and whether its tracked files differ from it (``dirty``); None where git cannot say."""
    def git(*args):
        return subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, timeout=30)

    try:
        commit = git("rev-parse", "HEAD")
        if commit.returncode:
            return {"commit": None, "dirty": None}
        dirty = bool(git("status", "--porcelain", "--untracked-files=no").stdout.strip())
        return {"commit": commit.stdout.strip(), "dirty": dirty}
    except (OSError, subprocess.TimeoutExpired):
        return {"commit": None, "dirty": None}


def _gpus() -> list[dict]:
    try:
        import torch

        if not torch.cuda.is_available():
            return []
        gpus = []
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            gpus.append({"index": i, "name": p.name, "memory_gib": round(p.total_memory / 2**30, 1)})
        return gpus
    except Exception:
        return []


def _interconnect() -> str | None:
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=30).stdout
            return "nvlink" if re.search(r"\bNV\d+\b", out) else "pcie"
        except (OSError, subprocess.TimeoutExpired):
            return None
    if Path("/sys/class/infiniband").is_dir() and any(Path("/sys/class/infiniband").iterdir()):
        return "infiniband"
    return None


def collect(command: list[str] | None = None) -> dict:
    import torch

    try:
        import horovod

        hvd_version = horovod.__version__
    except Exception:
        hvd_version = None
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu_model": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "memory_gib": _mem_gib(),
        "gpus": _gpus(),
        "interconnect": _interconnect(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "horovod": hvd_version,
        "horovod_build": horovod_build(),
        "git": git_record(),
        "launch_command": command,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
