"""``python -m bench study prepare|calibrate|plan|run|analyse|publish``: the DVC stages' commands. Each action
imports only its own module (:data:`ACTIONS`), so a stage runs, and dvc.yaml makes it depend on, only its code."""

from __future__ import annotations

from importlib import import_module

from .spec import load_study

ACTIONS = ("prepare", "calibrate", "plan", "register", "run", "analyse", "publish")
"""The actions, each the module ``bench.study.<action>`` with a ``main(study, args)``."""


def main(args) -> int:
    study = load_study(args.study)
    # the action's module alone: a change to another stage's code (e.g. the published README's) re-runs nothing here
    import_module(f"{__package__}.{args.action}").main(study, args)
    return 0


def add_parser(sub) -> None:
    s = sub.add_parser("study", help="plan, prepare or run a study of pipelines/studies/ (the DVC stages call these)")
    s.add_argument("action", choices=ACTIONS)
    s.add_argument("algorithm", nargs="?", metavar="ALGO|NOTEBOOK",
                   help="registry key (study run) or analysis notebook (study analyse)")
    s.add_argument("--html", action="store_true", help="analyse: also render the notebook as <study>/<notebook>.html")
    s.add_argument("--study", help="study: pipelines/studies/<study>.yaml (default: params.yaml's `study`)")
    s.add_argument("--to", help="publish: the folder to copy the study's tables, figures and system description to")
    s.add_argument("--force", action="store_true",
                   help="register: write a new registration over the study's (its earlier runs then carry no verdict)")
    s.set_defaults(func=main)
