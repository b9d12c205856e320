"""Where results live: a run's name, and a study's folders. The only module that knows either.

::

    results/<study>/
      plan/<algo>/plan.json                       what the study runs of <algo> (DVC: the plan stage)
      plan/<algo>/<hardware>/<name>.json          each planned run's config.json, written once, launched as is
      runs/<algo>/<hardware>/<name>/              run directories (DVC: one run@<algo> stage per algorithm)
      figures/<notebook>/*.png  tables/*.csv  metrics/*.json  notebooks/*.ipynb  report.html

``<name>`` is :func:`run_name`: ``<algo>-np<N>[-<tag>]``. A study may span several hardware
profiles (an emulated cluster at several link rates, a laptop and a cluster): each run sits under
its hardware id, and :func:`run_key` (``<name>@<hardware>``) tells runs apart inside a study.
``python -m bench run --study X`` writes where the notebooks of study X look.

Confinement: study, tag, hardware and algorithm names are plain names (:func:`check_name`: letters, digits,
``.``, ``_``, ``-``, not starting with ``.``), refused with a :class:`bench.BenchError` otherwise, and
:meth:`StudyLayout.run_dir` checks that the resolved run directory lies under the study's folder: nothing
the suite writes for a study lands outside ``results/<study>/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from . import BenchError, short

REPO_ROOT = Path(__file__).resolve().parent.parent
PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
MAX_NAME = 128
"""The longest study, tag or hardware name (a run's folder is ``<algo>-np<N>-<tag>``)."""


def check_name(kind: str, value, empty_ok: bool = False) -> str:
    """``value`` if it is a plain name (one path component: letters, digits, ``._-``, not starting with ``.``);
    else a BenchError naming ``kind`` and the bad value. ``empty_ok``: ``""`` is allowed (an absent tag)."""
    if isinstance(value, str) and len(value) > MAX_NAME:  # a run's folder name holds it: file names end at 255 bytes
        raise BenchError(f"invalid {kind} name {value[:24]!r}... ({len(value)} characters): a {kind} name has at "
                         f"most {MAX_NAME}")
    if isinstance(value, str) and (PLAIN_NAME.fullmatch(value) or (empty_ok and value == "")):
        return value
    raise BenchError(f"invalid {kind} name {value!r}: a {kind} name is a plain name (letters, digits, '.', '_', '-'; "
                     f"not starting with '.'; no '/')")


def confined(path: Path, folder: Path, what: str) -> Path:
    """``path`` if, resolved, it lies under ``folder`` (resolved); else a BenchError naming ``what``."""
    p, f = Path(path).resolve(), Path(folder).resolve()
    if p != f and f not in p.parents:
        raise BenchError(f"{what} {str(p)!r} lies outside {str(f)!r}")
    return Path(path)


def run_name(algorithm: str, np: int, tag: str = "") -> str:
    """A run's name inside its study and hardware: ``<algo>-np<N>[-<tag>]``."""
    return f"{algorithm}-np{np}" + (f"-{tag}" if tag else "")


def run_key(algorithm: str, np: int, tag: str, hardware: str) -> str:
    """A run's key inside its study (several hardware profiles may run the same name): ``<name>@<hardware>``."""
    return f"{run_name(algorithm, np, tag)}@{hardware}"


def _in_study(name: str) -> property:
    """A path of a study's folder, as a property of :class:`StudyLayout`: ``<root>/<study>/<name>``."""
    return property(lambda layout: layout.dir / name, doc=f"``<root>/<study>/{name}``")


@dataclass(frozen=True)
class StudyLayout:
    """The folders of one study under a results root (default: the repository's ``results/``)."""

    study: str
    root: Path = REPO_ROOT / "results"

    def __post_init__(self):
        check_name("study", self.study)

    @property
    def dir(self) -> Path:
        return Path(self.root) / self.study

    runs = _in_study("runs")
    plan = _in_study("plan")
    tables = _in_study("tables")
    metrics = _in_study("metrics")
    notebooks = _in_study("notebooks")
    report = _in_study("report.html")

    def figures(self, notebook: str) -> Path:
        return self.dir / "figures" / notebook

    def algorithm_runs(self, algorithm: str) -> Path:
        return self.runs / algorithm

    def algorithm_plan(self, algorithm: str) -> Path:
        return self.plan / algorithm

    def run_dir(self, algorithm: str, hardware: str, np: int, tag: str = "") -> Path:
        """A run's directory; BenchError if a name is not plain or the directory would lie outside the study."""
        _check_run_names(algorithm, hardware, tag)
        return confined(self.algorithm_runs(algorithm) / hardware / run_name(algorithm, np, tag), self.dir, "run directory")

    def plan_file(self, algorithm: str, hardware: str, np: int, tag: str = "") -> Path:
        _check_run_names(algorithm, hardware, tag)
        return confined(self.algorithm_plan(algorithm) / hardware / f"{run_name(algorithm, np, tag)}.json", self.dir,
                        "plan file")


def _check_run_names(algorithm: str, hardware: str, tag: str) -> None:
    check_name("algorithm", algorithm)
    check_name("hardware", hardware)
    check_name("tag", tag, empty_ok=True)


def default_run_dir(cfg, root: Path | None = None) -> Path:
    """Where ``python -m bench run`` writes ``cfg`` (a :class:`bench.config.RunConfig`) without ``--out``."""
    layout = StudyLayout(cfg.study, root) if root else StudyLayout(cfg.study)
    return layout.run_dir(cfg.algorithm, cfg.launch.hardware, cfg.launch.np, cfg.tag)


def output_path(text: str, option: str, folder: bool) -> Path:
    """A command's output (``--publish DIR``, ``--out FILE``, a benchmark's ``--json FILE``) checked before anything is
    computed or written (a relative folder is taken from the repository's root, a relative file from here): every name of the path at
    most 255 bytes, no symlink loop, each existing part above it a folder, not a pseudo file system (/proc, /sys, /dev),
    and the path itself a folder (``folder``) or a file that is not one."""
    path = Path(text if text.startswith("/") or not folder else REPO_ROOT / text)
    if not text:
        raise BenchError(f"{option} is empty: give a {'folder' if folder else 'file'}")
    if any(len(part.encode()) > 255 for part in path.parts):
        raise BenchError(f"{option} {short(text)}: a name of the path is longer than 255 bytes, the file systems' limit")
    try:
        real = path.resolve(strict=False)
    except (OSError, RuntimeError) as e:
        raise BenchError(f"{option} {short(text)}: cannot be resolved ({e})") from None
    if real.parts[1:2] and real.parts[1] in ("proc", "sys", "dev"):
        raise BenchError(f"{option} {short(text)} is under /{real.parts[1]}, not a place for results")
    for parent in reversed(real.parents):
        if parent.exists() and not parent.is_dir():
            raise BenchError(f"{option} {short(text)}: {parent} is a file, not a folder")
    if real.exists() and real.is_dir() != folder:
        raise BenchError(f"{option} {short(text)} is {'a file' if folder else 'a folder'}: give "
                         f"{'a folder' if folder else 'a file name'}")
    return path
