"""``python -m bench study prepare|calibrate|plan|run|analyse|publish``: the DVC stages' commands (and ``register``,
``reread``: before the runs, and an exploratory re-reading of published tables). Each action
imports only its own module (:data:`ACTIONS`), so a stage runs, and dvc.yaml makes it depend on, only its code.
``python -m bench study list`` prints every study with its description (no stage runs it)."""

from __future__ import annotations

from importlib import import_module

from .. import BenchError
from .spec import load_study, study_names

ACTIONS = ("prepare", "calibrate", "plan", "register", "run", "analyse", "publish", "reread")
"""The actions, each the module ``bench.study.<action>`` with a ``main(study, args)``."""


def main(args) -> int:
    for name in ("study", "to"):
        if getattr(args, name) == "":
            raise BenchError(f"--{name} is empty: give a name or a folder (or leave --{name} out where it may be)")
    if args.action == "list":
        return list_studies()
    study = load_study(args.study)
    # the action's module alone: a change to another stage's code (e.g. the published README's) re-runs nothing here
    import_module(f"{__package__}.{args.action}").main(study, args)
    return 0


def list_studies() -> int:
    """Every study of ``pipelines/studies/`` with its ``description``, one a line (the list the docs point to)."""
    names = study_names()
    width = max(map(len, names), default=0)
    for name in names:
        print(f"{name:<{width}}  {load_study(name).spec.description}")
    return 0


def add_parser(sub) -> None:
    s = sub.add_parser("study", help="plan, prepare or run a study of pipelines/studies/ (the DVC stages call these)")
    s.add_argument("action", choices=(*ACTIONS, "list"), help="a stage's action, or list: every study and its description")
    s.add_argument("algorithm", nargs="?", metavar="ALGO|NOTEBOOK",
                   help="registry key (study run) or analysis notebook (study analyse)")
    s.add_argument("--html", action="store_true", help="analyse: also render the notebook as <study>/<notebook>.html")
    s.add_argument("--study", help="study: pipelines/studies/<study>.yaml (default: params.yaml's `study`)")
    s.add_argument("--to", help="publish: the folder to copy the study's tables, figures and system description to; "
                                "reread: the published folder to read (default docs/results/<study>)")
    s.add_argument("--target-window", type=int, metavar="K",
                   help="reread: time to target as the running mean of the last K held-out evaluations reaching it "
                        "(default: the registered window, where every claim is recomputed)")
    s.add_argument("--force", action="store_true",
                   help="register: write a new registration over the study's (its earlier runs then carry no verdict)")
    s.set_defaults(func=main)
