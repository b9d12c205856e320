"""``python -m bench study analyse NOTEBOOK [--html]``: the analysis stages. ``notebooks/<name>.ipynb`` executed for the
study with papermill, and with ``--html`` rendered without its code (:func:`analyse`)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import papermill

from .. import BenchError
from ..layout import REPO_ROOT
from ..results import write_text_atomic
from .spec import Study

USER_ERRORS = ("BenchError", "ResultsError")
"""Exceptions of the suite a notebook may raise on bad input (:class:`bench.BenchError` and its subclasses): one line,
exit 2, like on the command line."""
KERNEL_QUIET = ["--IPKernelApp.log_level=CRITICAL",
                "--IPKernelApp.exec_lines=import logging; logging.getLogger('tornado').setLevel(logging.CRITICAL)"]
"""The kernel's own log lines kept off the command's stderr, where a refusal is one line: its warning that it listens on
loopback TCP unencrypted, the ERROR line "KeyboardInterrupt caught in kernel" that a loaded machine shows when
papermill ends the kernel after a failed cell, and tornado's "Uncaught exception in ZMQStream callback" with its
traceback (ZMQError "Socket operation on non-socket"), which a control message handled while the kernel shuts down
logs now and then (seen once in tests/single/test_hostile_readers.py; the line runs before the notebook's first cell
and is not in its history)."""
ANALYSES = ("speedup", "convergence", "temporal_efficiency", "hardware", "regimes", "report")
"""The analysis notebooks (``notebooks/<name>.ipynb``) a study's DVC stages execute, one stage each."""


def analyse(study: Study, notebook: str, html: bool = False) -> Path:
    """Execute ``notebooks/<notebook>.ipynb`` for the study with papermill (parameter ``study``) into
    ``results/<study>/notebooks/``; with ``html``, also render it without its code as ``results/<study>/<notebook>.html``
    (nbconvert). Returns the executed notebook's path. What each DVC analysis stage runs."""
    if notebook not in ANALYSES:
        raise BenchError(f"unknown analysis notebook {notebook!r}; valid: {', '.join(ANALYSES)}")
    layout = study.layout
    out = layout.notebooks / f"{notebook}.ipynb"
    with tempfile.TemporaryDirectory(prefix="bench-analyse-") as staged:  # the executed notebook replaces the old one
        executed = Path(staged) / out.name                                # only when it ran to its end
        try:
            papermill.execute_notebook(str(REPO_ROOT / "notebooks" / f"{notebook}.ipynb"), str(executed),
                                       parameters={"study": study.name}, cwd=str(REPO_ROOT), kernel_name="python3",
                                       progress_bar=False, extra_arguments=KERNEL_QUIET)
        except papermill.PapermillExecutionError as e:
            if e.ename in USER_ERRORS:  # a corrupt results file, a bad setting: its one line, not the kernel's traceback
                raise BenchError(f"{e.evalue} (notebooks/{notebook}.ipynb, cell {e.exec_count})") from None
            keep(executed, out)  # a fault of the suite: the executed notebook shows where
            raise
        keep(executed, out)
    if html:  # nbconvert only where a page is asked for
        import nbformat
        from nbconvert import HTMLExporter

        exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
        body, _ = exporter.from_notebook_node(nbformat.read(str(out), as_version=4))
        (layout.dir / f"{notebook}.html").write_text(body)
    return out


def keep(executed: Path, out: Path) -> None:
    """The executed notebook moved to ``out`` (a reader sees the old one or the whole new one)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, executed.read_text())


def main(study: Study, args) -> None:
    if not args.algorithm:
        raise BenchError(f"study analyse needs a notebook: python -m bench study analyse NAME (valid: "
                         f"{', '.join(ANALYSES)})")
    print(f"[analyse] {analyse(study, args.algorithm, html=args.html)}")
