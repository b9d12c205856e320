"""The run-directory schema: write and load.

A run directory holds ``config.json``, ``system.json``, ``rank<r>.jsonl`` (one record per
worker step), ``eval.jsonl`` (held-out evaluations of the model that matters),
``summary.json`` (status ``ok`` / ``failed`` with the reason) and optionally ``model.pt``.
JSON files are written atomically (temporary file + rename): a crash never leaves a
half-written summary. Records are appended line by line: ``eval.jsonl`` flushed after every line, the
per-step ``rank<r>.jsonl`` at most once a second (and at the first line, and when the rank ends or fails),
so a rank killed outright loses at most its last second of step records; a torn last line of a failed run
is tolerated when loading, any other corrupt line is an error naming the file and line. Loaded, the records'
``t`` count from the first step's start (the earliest over the worker ranks), so that the broadcast of the job's
clock after its start barrier (0.3-1.5 s on the emulated hosts) counts in no time to target
(``Run.extra["t_origin_s"]`` is the shift). An ``ok`` run must hold
a non-empty ``rank<r>.jsonl`` for every worker and a non-empty ``eval.jsonl``: one missing or empty is a
:class:`ResultsError` naming the file, never a run loaded with figures silently changed. What is read is believed only
within physics (:data:`RANGES`: an accuracy in [0, 1], counts and steps integers in int64's range and >= 0, times
>= 0; each worker's steps once each; ``rank<r>.jsonl`` only for the run's workers, r < np >= 1), and only from regular
files (:func:`open_regular`: a FIFO would block the reader, a directory is no file): else a ResultsError naming the
file and line.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import SCHEMA_VERSION, BenchError, short

@dataclass
class StepRecord:
    """One worker step: one line of ``rank<r>.jsonl``, its keys in the order of these fields (the worker writes it,
    :func:`load_run` reads the lines into ``Run.steps``, one column per field)."""

    step: int
    """The worker's steps so far, this one included (1, 2, ...)."""
    epoch: float
    """step / steps per epoch."""
    t: float
    """Seconds from the job's common start to the end of the step (loaded: from the first step's start)."""
    samples: int
    """Samples of the step's mini-batch."""
    loss: float
    """The mini-batch's training loss."""
    accuracy: float
    """The mini-batch's training accuracy."""
    step_s: float
    """The step's wall time (an injected straggler delay included)."""
    compute_s: float
    """step_s less comm_s and wait_s."""
    comm_s: float
    """Time the algorithm marked as communication (``ctx.timer.comm()``)."""
    wait_s: float
    """Time the algorithm marked as waiting (``ctx.timer.wait()``)."""
    injected_s: float
    """The straggler delay slept inside the step (bench.inject), 0 on other workers."""
    staleness: float | None
    """τ of the commit made in the step (asynchronous algorithms), else None."""
    bytes_sent: int
    """Payload bytes the worker handed to collectives or sent point-to-point."""
    warmup: bool
    """One of the first ``warmup_steps``: left out of the throughput."""

    def line(self) -> dict:
        """The record as written (a mapping in field order)."""
        return vars(self)

    @classmethod
    def keys(cls) -> list[str]:
        """The keys of a step record, in order."""
        return [f.name for f in fields(cls)]


EVAL_FIELDS = ("step", "epoch", "t", "samples_seen", "loss", "accuracy")
STEP_REQUIRED = ("step", "epoch", "t", "samples", "loss", "accuracy", "step_s")
"""The step record's fields every record must have (the others are checked where present: older runs lack some)."""
NULLABLE = ("loss", "staleness")
"""Record fields that may be null: a diverged model's loss (NaN is written as null), the staleness of a step without
a commit."""
INT64_MAX = 2**63 - 1
COUNT = (0, INT64_MAX, "a count, an integer in [0, 2**63 - 1]")
SECONDS = (0, math.inf, "a number of seconds >= 0")
FRACTION = (0, 1, "a fraction in [0, 1]")
RANGES = {"step": COUNT, "samples": COUNT, "samples_seen": COUNT, "bytes_sent": COUNT, "steps_per_worker": COUNT,
          "epoch": (0, math.inf, "a number >= 0"), "staleness": (0, math.inf, "a number >= 0"),
          "accuracy": FRACTION, "final_accuracy": FRACTION, "throughput": (0, math.inf, "a number of samples/s >= 0"),
          **dict.fromkeys(("step_s", "compute_s", "comm_s", "wait_s", "injected_s", "wall_s", "train_s", "eval_s",
                           "snapshot_s"), SECONDS)}
"""The physical range of each number of the records and the summary (low, high, what it is): a value outside it is
a corrupt or forged file, refused naming the file and line, never a figure (an accuracy of 5, a negative count, a step
beyond int64). ``t`` and the losses are any finite number."""
SUMMARY_NUMBERS = ("wall_s", "train_s", "eval_s", "snapshot_s", "throughput", "final_accuracy", "final_loss",
                   "steps_per_worker")
"""summary.json's numbers the analyses read: each, where present, a number in its range (:data:`RANGES`) or null."""


class ResultsError(BenchError, ValueError):
    """A corrupt, incomplete or incompatible results file (the message names the file and line); on the command
    line, one ``error:`` line and exit 2, like every :class:`bench.BenchError`."""


def _clean(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else (1e308 if obj > 0 else -1e308)
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def write_json_atomic(path: str | Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(_clean(obj), indent=2, sort_keys=True) + "\n")


def write_text_atomic(path: str | Path, text: str) -> None:
    """``text`` written to a temporary file beside ``path``, then renamed over it: a reader sees the old file or the
    whole new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def replace_folder(staged: Path, path: Path) -> None:
    """The folder ``staged`` (written in full, beside ``path``) moved into ``path``'s place, the old ``path`` (if any)
    removed after: a failing writer stages its files and leaves ``path`` as it was (remove ``staged`` then)."""
    old = None
    if path.exists():
        old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.old."))
        os.replace(path, old / path.name)
    os.replace(staged, path)
    if old is not None:
        shutil.rmtree(old)


def open_regular(path: str | Path):
    """``path`` opened for reading as UTF-8 text if it is a regular file; ResultsError naming it and what it is
    otherwise (a FIFO would block the reader for ever, a directory or a device is no results file), decided on the
    opened file (a FIFO opens at once without blocking), not on a name that may change in between. FileNotFoundError
    where nothing is there."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ResultsError(f"{path}: not a regular file ({file_kind(mode)}); a results file must be one")
        os.set_blocking(fd, True)
        return os.fdopen(fd, encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def file_kind(mode: int) -> str:
    """What an ``st_mode`` is, in words (for errors)."""
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISREG, "a regular file"))
    return next((what for test, what in kinds if test(mode)), "not a file")


def check_regular(path: str | Path, missing: str = "") -> None:
    """ResultsError unless ``path`` is a regular file (symbolic links followed): naming it and what it is, or, where
    nothing is there, with ``missing`` (nothing raised where ``missing`` is empty)."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):  # NotADirectoryError: a file where a folder is named (/dev/null/x)
        if missing:
            raise ResultsError(f"{path}: {missing}") from None
        return
    if not stat.S_ISREG(mode):
        raise ResultsError(f"{path}: not a regular file ({file_kind(mode)}); a results file must be one")


def read_json(path: str | Path) -> Any:
    path = Path(path)
    try:
        with open_regular(path) as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path}:{e.lineno}: corrupt JSON ({e.msg})") from None
    except UnicodeDecodeError as e:
        raise ResultsError(f"{path}: not a JSON text file (byte {e.start} is not UTF-8)") from None
    except RecursionError:
        raise ResultsError(f"{path}:1: corrupt JSON (nested too deep to be a results file)") from None


def read_json_object(path: str | Path) -> dict:
    """:func:`read_json` of a file that must hold a JSON object (config.json, system.json, summary.json)."""
    obj = read_json(path)
    if not isinstance(obj, dict):
        raise ResultsError(f"{path}: expected a JSON object, got {type(obj).__name__} {json.dumps(obj)[:40]}")
    return obj


_ENCODE = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def record_line(record: dict) -> str:
    """One JSONL line; NaN becomes null and ±inf ±1e308 (strict JSON). The common case (every float finite)
    takes the C encoder alone, the rare one the cleaning pass."""
    try:
        return _ENCODE(record) + "\n"
    except ValueError:
        return _ENCODE(_clean(record)) + "\n"


class JsonlWriter:
    """Append-only record file, one JSON object per line.

    ``flush_s=0``: every line is flushed as it is written. ``flush_s > 0`` (the per-step records, written
    every training step): records are kept, then encoded and written together at most every ``flush_s`` seconds,
    at the first line, and at :meth:`flush` / :meth:`close`, so a step pays for a reference in memory, not for
    encoding a line or a system call (a process killed outright loses at most ``flush_s`` of records)."""

    def __init__(self, path: str | Path, exclusive: bool = False, flush_s: float = 0.0):
        self.path = Path(path)
        self.flush_s = flush_s
        self.pending: list[str] = []
        self.next_flush = 0.0  # the first line is written at once: a reader sees that the rank has started
        try:
            self.f = open(self.path, "x" if exclusive else "a")
        except FileExistsError:
            raise FileExistsError(f"{self.path} already exists: this run directory already holds results; "
                                  f"prepare a new one (python -m bench run ... --prepare-only --out NEW_DIR)") from None

    def write(self, record: dict | StepRecord) -> None:
        """Keep ``record`` (a mapping, or a :class:`StepRecord`) for the next flush, which encodes it: a step pays for
        keeping a reference, the encoding runs once a second for every record since the last flush, so the caller
        must not change a record once written."""
        self.pending.append(record)
        if time.monotonic() >= self.next_flush:
            self.flush()

    def flush(self) -> None:
        self.check_intact()
        if self.pending:
            self.f.write("".join(record_line(r.line() if isinstance(r, StepRecord) else r) for r in self.pending))
            self.pending.clear()
        self.f.flush()
        self.next_flush = time.monotonic() + self.flush_s

    def check_intact(self) -> None:
        """ResultsError naming the file if it was deleted, replaced or truncated since this writer last wrote to it
        (appending on would end the run ``ok`` with its earlier records lost)."""
        self.f.flush()
        mine, written = os.fstat(self.f.fileno()), os.lseek(self.f.fileno(), 0, os.SEEK_CUR)
        try:
            there = os.stat(self.path).st_ino
        except OSError:
            there = None
        if mine.st_nlink == 0 or there != mine.st_ino:
            raise ResultsError(f"{self.path} was deleted or replaced while the job ran: its records are lost")
        if mine.st_size < written:
            raise ResultsError(f"{self.path} was truncated while the job ran ({written} bytes written, "
                               f"{mine.st_size} there): its records are lost")

    def close(self) -> None:
        if not self.f.closed:
            self.flush()
            self.f.close()


def read_jsonl(path: str | Path, tolerate_torn_tail: bool = False) -> list[dict]:
    path = Path(path)
    records = []
    try:
        with open_regular(path) as f:
            lines = f.read().split("\n")
    except UnicodeDecodeError as e:
        raise ResultsError(f"{path}: not a JSONL text file (byte {e.start} is not UTF-8)") from None
    if lines and lines[-1] == "":
        lines.pop()
    for i, line in enumerate(lines, start=1):
        try:
            rec = json.loads(line)
            if not isinstance(rec, dict):
                raise ValueError("not an object")
        except (ValueError, RecursionError) as e:
            if tolerate_torn_tail and i == len(lines):
                break
            raise ResultsError(f"{path}:{i}: corrupt record ({e})") from None
        records.append(rec)
    return records


def write_summary(run_dir: str | Path, status: str, **fields) -> dict:
    summary = {"schema_version": SCHEMA_VERSION, "status": status, **fields}
    write_json_atomic(Path(run_dir) / "summary.json", summary)
    return summary


def mark_failed(run_dir: str | Path, reason: str, root_cause: bool = False, **fields) -> dict:
    """Mark a run failed, keeping what an earlier (partial) summary recorded. The first reason recorded wins
    (the ranks that fail later only report secondary errors), unless this one is the ``root_cause`` (the
    launcher cancelled the job), which then comes first."""
    path = Path(run_dir) / "summary.json"
    old = {}
    if path.exists():
        try:
            old = read_json(path)
        except ResultsError:
            old = {}
    if old.get("status") == "failed" and old.get("reason"):
        reason = f"{reason}; then: {old['reason']}" if root_cause else old["reason"]
    old.update(fields)
    old.update({"schema_version": SCHEMA_VERSION, "status": "failed", "reason": reason})
    write_json_atomic(path, old)
    return old


# ----------------------------------------------------------------------------- loading


@dataclass
class Run:
    """One loaded run directory."""

    path: Path
    config: dict
    system: dict
    summary: dict
    steps: pd.DataFrame
    evals: pd.DataFrame
    extra: dict = field(default_factory=dict)

    @property
    def status(self) -> str:
        return self.summary.get("status", "incomplete")

    @property
    def label(self) -> dict:
        c = self.config
        return {"run": str(self.path), "algorithm": c["algorithm"], "np": c["launch"]["np"],
                "hardware": c["launch"]["hardware"], "study": c.get("study", ""), "tag": c.get("tag", ""),
                "repeat": c.get("repeat", 0), "profile": c.get("profile", ""), "status": self.status}


def check_records(path: Path, frame: pd.DataFrame, fields, required) -> None:
    """Every record of ``frame`` (read from ``path``, record i on line i + 1) has each of ``fields`` that is
    ``required`` or present in any record as a number (a boolean for ``warmup``; null allowed for :data:`NULLABLE`);
    ResultsError naming the file and the first bad line."""
    fields = [name for name in fields if name in required or name in frame]
    def refuse(name: str, row: int) -> None:
        value = frame[name].iloc[row] if name in frame else None
        kind = "true or false" if name == "warmup" else "a number" + (" or null" if name in NULLABLE else "")
        if value is None or (isinstance(value, float) and math.isnan(value)):
            raise ResultsError(f"{path}:{row + 1}: record without {name!r} ({kind})")
        raise ResultsError(f"{path}:{row + 1}: record's {name!r} is {str(value)[:40]!r}, not {kind}")

    is_bool, is_number = pd.api.types.is_bool_dtype, pd.api.types.is_numeric_dtype
    for name in fields:
        if name not in frame:
            refuse(name, 0)
    dtypes = frame.dtypes.to_dict()
    typed = {name: is_bool(dtypes[name]) if name == "warmup" else is_number(dtypes[name]) and not is_bool(dtypes[name])
             for name in fields}
    strict = [name for name in fields if typed[name] and name not in NULLABLE and name != "warmup"]
    columns = list(frame.columns)
    missing = frame.isna().to_numpy()[:, [columns.index(n) for n in strict]]  # the common case: one pass
    if missing.any():
        row, col = (int(a[0]) for a in missing.nonzero())
        refuse(strict[col], row)
    values = frame[strict].to_numpy(dtype=float)
    infinite = np.isinf(values)  # JSON's Infinity: the suite's writer never writes it (write_json_atomic)
    if infinite.any():
        row, col = (int(a[0]) for a in infinite.nonzero())
        raise ResultsError(f"{path}:{row + 1}: record's {strict[col]!r} is {values[row, col]}, not a finite number")
    for name in (n for n in fields if not typed[n]):  # a column of mixed types: value by value
        column = frame[name]
        if name in NULLABLE and column.isna().all():
            continue
        if name == "warmup":
            bad = ~column.map(lambda v: isinstance(v, bool))
        else:
            number = pd.to_numeric(column.map(lambda v: None if isinstance(v, bool) else v), errors="coerce")
            bad = number.isna() & (column.notna() if name in NULLABLE else True)
        if bad.any():
            refuse(name, int(bad.to_numpy().nonzero()[0][0]))
    for name in (n for n in fields if n in RANGES):
        column = frame[name] if typed[name] else pd.to_numeric(frame[name], errors="coerce")
        low, high, what = RANGES[name]
        bad = (column < low) | (column > high)  # compared in the column's own type: 2**63 (uint64) is beyond int64
        if what is COUNT[2]:
            bad |= column.notna() & (column % 1 != 0)
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            raise ResultsError(f"{path}:{row + 1}: record's {name!r} is {str(frame[name].iloc[row])[:40]}, not {what}")


def _check_label(path: Path, config: dict) -> None:
    """config.json holds what a run's label reads (algorithm, launch.np, launch.hardware); ResultsError otherwise."""
    launch = config.get("launch")
    if not (isinstance(config.get("algorithm"), str) and isinstance(launch, dict)
            and isinstance(launch.get("np"), int) and not isinstance(launch.get("np"), bool)
            and isinstance(launch.get("hardware"), str)):
        raise ResultsError(f"{path}: not a run's configuration (algorithm, launch.np and launch.hardware missing or "
                           f"of the wrong type)")
    if launch["np"] < 1:
        raise ResultsError(f"{path}: launch.np is {launch['np']}; a run has at least 1 worker")


def check_summary(path: Path, summary: dict) -> None:
    """summary.json's status is ok, failed or incomplete and each of :data:`SUMMARY_NUMBERS` it holds a number in its
    range or null; ResultsError naming the file and the key otherwise."""
    if summary.get("status") not in ("ok", "failed", "incomplete"):
        raise ResultsError(f"{path}: status {str(summary.get('status'))[:40]!r} is not ok or failed")
    for key in SUMMARY_NUMBERS:
        value = summary.get(key)
        if value is None:
            continue
        low, high, what = RANGES.get(key, (-math.inf, math.inf, "a number"))
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (number and low <= value <= high) or (what is COUNT[2] and not isinstance(value, int)):
            raise ResultsError(f"{path}: {key} is {short(value, 40)}, not {what} or null")


def load_run(path: str | Path) -> Run:
    path = Path(path)
    cfg_path = path / "config.json"
    check_regular(cfg_path, missing="none here: not a run directory")
    config = read_json_object(cfg_path)
    if config.get("schema_version") != SCHEMA_VERSION:
        raise ResultsError(f"{cfg_path}: schema_version {config.get('schema_version')!r}, this suite reads {SCHEMA_VERSION}")
    _check_label(cfg_path, config)
    system = read_json_object(path / "system.json") if (path / "system.json").exists() else {}
    summary = read_json_object(path / "summary.json") if (path / "summary.json").exists() else {"status": "incomplete"}
    check_summary(path / "summary.json", summary)
    ok = summary.get("status") == "ok"
    if ok:
        _check_complete(path, config)
    frames = []
    for f in rank_files(path, config["launch"]["np"]):
        recs = read_jsonl(f, tolerate_torn_tail=not ok)
        if recs:
            df = pd.DataFrame.from_records(recs)
            check_records(f, df, StepRecord.keys(), STEP_REQUIRED)
            twice = df["step"].duplicated()
            if twice.any():
                row = int(twice.to_numpy().nonzero()[0][0])
                step = df["step"].iloc[row]
                first = int((df["step"] == step).to_numpy().nonzero()[0][0])
                raise ResultsError(f"{f}:{row + 1}: step {step} recorded again (first on line {first + 1}): a "
                                   f"worker's steps are recorded once each")
            df.insert(0, "rank", int(f.stem[4:]))
            frames.append(df)
    steps = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["rank", *StepRecord.keys()])
    ev = path / "eval.jsonl"
    evals = pd.DataFrame.from_records(read_jsonl(ev, tolerate_torn_tail=not ok)) if ev.exists() else pd.DataFrame()
    if not evals.empty:
        check_records(ev, evals, EVAL_FIELDS, EVAL_FIELDS)
    if evals.empty:
        evals = pd.DataFrame(columns=list(EVAL_FIELDS))
    origin = first_step_start(steps)
    if origin > 0:  # times from the first step's start (module docstring)
        steps["t"] = steps["t"] - origin
        evals["t"] = evals["t"] - origin
    return Run(path, config, system, summary, steps, evals, extra={"t_origin_s": origin})


def rank_files(path: Path, np_: int) -> list[Path]:
    """The run directory's ``rank<r>.jsonl`` files, in rank order; ResultsError on a rank file of no worker of the run
    (r >= np: it would count as one more worker's steps) or a name that is no rank's (``rank01.jsonl``)."""
    found = {}
    for f in path.glob("rank*.jsonl"):
        digits = f.stem[4:]
        if not digits.isdigit():
            continue
        if digits != str(int(digits)) or int(digits) >= np_:
            raise ResultsError(f"{f}: no worker of this run writes it (its workers are ranks 0..{np_ - 1}, np {np_} "
                               f"in config.json): a stray or forged record file")
        found[int(digits)] = f
    return [found[r] for r in sorted(found)]


def first_step_start(steps: pd.DataFrame) -> float:
    """When the first step began (the earliest over the worker ranks), in the files' seconds from the job's start
    barrier; 0.0 without steps."""
    if steps.empty:
        return 0.0
    first = steps.loc[steps.groupby("rank")["step"].idxmin()]
    return max(float((first["t"] - first["step_s"]).min()), 0.0)


def _check_complete(path: Path, config: dict) -> None:
    """An ``ok`` run holds a non-empty record file for every worker and a non-empty eval.jsonl; else ResultsError."""
    try:
        np_ = int(config["launch"]["np"])
    except (KeyError, TypeError, ValueError):
        raise ResultsError(f"{path / 'config.json'}: no launch.np") from None
    for f in [path / f"rank{r}.jsonl" for r in range(np_)] + [path / "eval.jsonl"]:
        check_regular(f, missing="missing, but the run's summary says ok (an incomplete or tampered run directory)")
        if f.stat().st_size == 0:
            raise ResultsError(f"{f}: empty, but the run's summary says ok (an incomplete or tampered run directory)")


def find_runs(root: str | Path) -> list[Path]:
    """Every run directory (a folder with config.json) under ``root``, sorted."""
    return sorted(p.parent for p in Path(root).rglob("config.json"))


def load_runs(root: str | Path) -> list[Run]:
    """Every run directory under ``root`` (e.g. a study's ``runs/``), failed ones included (see bench.metrics)."""
    return [load_run(p) for p in find_runs(root)]


def _tidy(runs: list[Run], attr: str) -> pd.DataFrame:
    frames = []
    for r in runs:
        df = getattr(r, attr).copy()
        for k, v in reversed(list(r.label.items())):
            df.insert(0, k, v)
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def steps_frame(runs: list[Run]) -> pd.DataFrame:
    """All step records of ``runs`` as one tidy DataFrame (one row per rank and step, run labels as columns)."""
    return _tidy(runs, "steps")


def evals_frame(runs: list[Run]) -> pd.DataFrame:
    return _tidy(runs, "evals")


def summaries_frame(runs: list[Run]) -> pd.DataFrame:
    rows = []
    for r in runs:
        row = dict(r.label)
        row.update({k: v for k, v in r.summary.items() if not isinstance(v, (dict, list)) and k != "status"})
        rows.append(row)
    return pd.DataFrame(rows)
