"""The seed papers' claims as rules declared before the runs (:data:`RULES`), and their verdicts from a study's cells.

A :class:`Rule` names the cells it applies to (straggler, links, a condition on the reference's communication share
or staleness), the metric, the algorithms it is about (``subjects``) and what they are compared with
(``references``), the direction (every effect is a paired ratio oriented so that > 1 favours the subject,
:func:`bench.metrics.stats.paired_ratio`) and the threshold the effect must exceed (1: better; 0.95: at most 5 %
worse), with an optional ceiling (what the mechanism can give at most: overlapping communication with compute gains
at most 1/max(s, 1-s) for communication share s).

A claim's **tests** are its (subject, reference, cell) combinations present in the study, each a paired ratio over
the cell's repeats (a time to target where a run never reached the target is a bound, not a value:
:func:`bench.metrics.stats.censored_ratio` lets such a test contradict but not support, or the reverse). Per test,
the one-sided t-test p-values (on the log ratios) of "effect > bar" and of "effect < bar" (the bar: the threshold,
raised by the rule's minimum effect worth reporting where it has one, :meth:`Rule.bar`) are Holm-corrected across
the claim's tests (:func:`bench.metrics.stats.holm`, family-wise level 0.025 each side, matching the 95 % two-sided
interval). A test **supports** the claim when its Holm-adjusted p of "effect > bar" is below 0.025 (and, with a
ceiling, its interval does not lie above the ceiling), **contradicts** it when that of "effect < bar" is. Verdict:
``reproduced`` when every test supports it, ``not reproduced`` when any test contradicts it, ``inconclusive``
otherwise, and ``not testable here`` when the study has none of its cells, or fewer than 3 repeats in every one of
them (no interval: a study of one run per cell says so instead of a verdict). A study may repeat only the cells its
claims test (``repeats_where``): a claim is then judged on its tests with at least 3 repeats, and its evidence
counts the tests left out for having fewer. A rule may test only the strongest of its references in each cell
(:attr:`Rule.baseline`), or a method's worst over a cell's grid points, or over its grid points and numbers of
workers together (:attr:`Rule.over_points`).
``claims.csv`` gives per claim the effect, interval and n of the deciding test (the weakest support, or the strongest
contradiction), the rule and the verdict, with every test in ``evidence``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from .. import BenchError
from .stats import HIGHER_IS_BETTER, INTERVAL, MIN_N, censored_ratio, holm, paired_ratio

ALPHA = 0.025
"""Family-wise level of each one-sided Holm family (support, contradiction)."""
VERDICTS = ("reproduced", "not reproduced", "inconclusive", "not testable here")

PUBLISHED = "the regimes study on the emulated cluster tests it: docs/results/regimes/tables/claims.csv"
"""Where a claim that a study cannot test is tested (the published regimes study's verdicts)."""
LOO_COLUMNS = ["loo_low", "loo_high"]
"""The range of the deciding bound with one repeat (seed) left out at a time: the deciding test's ``ci_low`` where its
effect is at or above the rule's bar (what must stay above it), its ``ci_high`` otherwise. A verdict whose
range crosses the bar hangs on one seed; NaN where the deciding test has 3 pairs (none to spare). Added
2026-11-29: tables analysed before lack them."""
BASELINE_COLUMNS = ["baseline"]
"""Which reference the deciding test compared with, and how it was chosen (every reference of the rule, or the
strongest of them in that cell: :attr:`Rule.baseline`). Added 2026-11-29: tables analysed before lack it."""
ADDED_COLUMNS = [*LOO_COLUMNS, *BASELINE_COLUMNS]
"""The columns a claims.csv analysed before 2026-11-29 may lack."""
COLUMNS = ["source", "claim", "quote", "workload", "effect", "ci_low", "ci_high", "interval_method", "n", "rule",
           "registration", "verdict", "tests", "evidence", *LOO_COLUMNS, *BASELINE_COLUMNS]


@dataclass(frozen=True)
class Rule:
    """One seed claim, pre-registered: which cells, which metric, which direction, which threshold / ceiling."""

    source: str
    claim: str
    subjects: tuple[str, ...]
    """Algorithms the claim is about (every one must support it)."""
    references: tuple[str, ...]
    """Algorithms they are compared with in the same cell, paired on the repeat."""
    metric: str
    """A column of the regimes cells (``throughput``, ``time_to_target_s``, ``final_accuracy``) or
    ``straggler_pace`` (the run's throughput over the same algorithm's without the straggler, same repeat)."""
    threshold: float = 1.0
    """The paired ratio (> 1 favours the subject) must exceed this."""
    straggler: str = "all"
    """Cells: ``none`` (no straggler), ``any`` (with a straggler) or ``all``."""
    links: tuple[str, ...] = ()
    """Cells on these links only (empty: every link)."""
    comm_share: tuple[float, float] | None = None
    """Cells where the reference's median communication share lies in this range."""
    min_reference_staleness: float | None = None
    """Cells where the reference's median mean staleness is at least this."""
    overlap_ceiling: bool = False
    """The effect cannot exceed 1/max(s, 1-s), s the reference's communication share (overlap hides at most the
    smaller of communication and compute); a test whose interval lies above it is flagged, not counted as support."""
    delays: tuple[str, ...] = ()
    """Cells whose links have these one-way delays only (``link_delay``, e.g. ``0ms``, ``25ms``; empty: any)."""
    workers: tuple[int, ...] = ()
    """Cells at these numbers of workers only (empty: any)."""
    quote: str = ""
    """The sentence of the paper that makes the claim, verbatim (claims.csv ``quote``), with where it stands."""
    min_effect: float = 0.0
    """The smallest effect worth reporting, a fraction of the threshold (0.05: 5 %): the tests are against the bar
    ``threshold x (1 + min_effect)`` (:meth:`bar`), so an effect that is real but smaller than that does not support
    the claim, and one surely below it contradicts it (a minimum-effect test)."""
    baseline: str = "each"
    """``each``: the subject must beat every reference (one test per reference and cell); ``best``: in each cell
    only the strongest reference, the one with the best median of the metric over the cell's repeats (a run that never
    reached the target counted as never), is the baseline. Choosing it on the same runs favours the baseline: the
    test is conservative, never lenient."""
    over_points: str = "each"
    """``each``: every grid point of a cell is a test; ``worst``: a method's worst value over the cell's grid points
    (per repeat) is compared with the reference's worst (robustness to the grid's hyperparameters: the metric must
    not be a time to target, whose censored runs have no worst value); ``worst_workers``: the same over the grid
    points and the numbers of workers together (robustness to the distributed hyperparameters too: one test a subject
    where the workers are not a cell of their own)."""

    def bar(self) -> float:
        """What the paired ratio must exceed: the threshold raised by the minimum effect."""
        return self.threshold * (1.0 + self.min_effect)

    def text(self) -> str:
        """The rule in words (the ``rule`` column of claims.csv)."""
        better = "higher" if HIGHER_IS_BETTER.get(self.metric, True) else "lower"
        where = {"none": "without a straggler", "any": "with a straggler", "all": "in every regime"}[self.straggler]
        against = (f"the best of {' and '.join(self.references)} in each cell" if self.baseline == "best"
                   else ' and '.join(self.references))
        of = {"worst": f"the worst over the grid of {self.metric}",
              "worst_workers": f"the worst over the grid and the numbers of workers of {self.metric}"}.get(
            self.over_points, self.metric)
        above = (f"{self.bar():g} (threshold {self.threshold:g}, minimum effect {self.min_effect:.0%})"
                 if self.min_effect else f"{self.threshold:g}")
        parts = [f"{' and '.join(self.subjects)} vs {against}: paired ratio of {of} ({better} is better) > {above}, "
                 f"{where}"]
        if self.links:
            parts.append(f"links {', '.join(self.links)}")
        if self.delays:
            parts.append(f"link delays {', '.join(self.delays)}")
        if self.workers:
            parts.append(f"{', '.join(map(str, self.workers))} workers")
        if self.comm_share:
            parts.append(f"reference's comm share in [{self.comm_share[0]:g}, {self.comm_share[1]:g}]")
        if self.min_reference_staleness is not None:
            parts.append(f"reference's mean staleness >= {self.min_reference_staleness:g}")
        if self.overlap_ceiling:
            parts.append("ceiling 1/max(s, 1-s)")
        return "; ".join(parts) + f"; Holm across the tests, {MIN_N}+ repeats"


PS = ("downpour", "agn", "adag", "dynsgd")

VISHNU = ("Vishnu, Siegel, Daily 2017, 'Leveraging Asynchronicity in Gradient Descent for Scalable Deep Learning', "
          "abstract: \"Our evaluation of these neural network topologies indicates asynchronous gradient descent has a "
          "speedup of up to 1.7x compared to synchronous.\"")
LASGD = ("Avidor et al. 2022, arXiv:2203.13085, abstract: \"Our experiments demonstrate that LASGD accelerates training "
         "compared to SGD and state of the art gossip based approaches.\"")
ASSRAN = ("Assran et al. 2019, arXiv:1811.10792v1 abstract: \"using 32 nodes with 8 GPUs per node to train ResNet-50 "
          "on ImageNet, where nodes communicate over 10Gbps Ethernet, SGP completes 90 epochs in around 1.6 hours while "
          "AllReduce SGD takes over 5 hours\"; ICML 2019 abstract: \"Approaches that synchronize nodes using exact "
          "distributed averaging (e.g., via AllReduce) are sensitive to stragglers and communication delays.\"")
HERMANS = ("Hermans 2017, MSc thesis (Maastricht University), abstract: \"This work shows that these methods outperform "
           "existing methods, and are more robust to (distributed) hyperparameterization contrary to existing "
           "distributed optimization algorithms such as downpour\"")
HERMANS_N = ("Hermans 2017, MSc thesis, conclusion: \"we validate the result that downpour becomes very unstable as "
             "the number of parallel workers increases\"; ADAG chapter: \"when adag is applied, this instability is "
             "gone\" (of AGN: \"as the number of asynchronous workers was increased in agn, divergent behaviour "
             "started to occur\")")
LIAN = ("Lian et al. 2018 (AD-PSGD), introduction: \"When there are stragglers (i.e., slower workers) in the system, "
        "which is common especially at the scale of hundreds devices, asynchronous approaches are more robust.\"")
LIAN_NET = ("Lian et al. 2018 (AD-PSGD), abstract: \"Synchronous algorithms like AllReduce-SGD perform poorly in a "
            "heterogeneous environment\"")
LIAN_RESULT = ("Lian et al. 2018 (AD-PSGD), ICML abstract: \"Empirically, AD-PSGD outperforms the best of decentralized "
               "parallel SGD (D-PSGD), asynchronous parallel SGD (A-PSGD), and standard data parallel SGD "
               "(AllReduce-SGD), often by orders of magnitude in a heterogeneous environment.\"")
VIVIANI = ("Viviani et al. 2019, 'Deep Learning at Scale', PDP, abstract (no sentence of the paper names FAST's "
           "accuracy; this is the closest): \"a different approach is presented that is meant to allow DNN training "
           "to scale while retaining good convergence properties\"")
DILOCO = ("Douillard et al. 2023 (DiLoCo), abstract: \"enables training of language models on islands of devices that "
          "are poorly connected\"; \"DiLoCo on 8 workers performs as well as fully synchronous optimization while "
          "communicating 500 times less.\"")


def _rule(source: str, claim: str, subjects, references, metric: str, quote: str, **cells) -> Rule:
    return Rule(source, claim, tuple(subjects), tuple(references), metric, quote=quote, **cells)


RULES: dict[str, Rule] = {
    # the first regimes study's six (docs/results/regimes, 2026-11): kept as they were judged, quotes added
    "vishnu": _rule("Vishnu et al. 2017", "delayed and layer-wise asynchronous allreduce beat sync when communication "
                    "is comparable to compute (up to 1.7x on their hardware)", ("delayed", "layerwise"), ("sync",),
                    "throughput", VISHNU, straggler="none", comm_share=(0.25, 0.75), overlap_ceiling=True),
    "lasgd": _rule("LASGD, 2022", "LASGD trains faster than synchronous SGD and than gossip (SGP, AD-PSGD)",
                   ("lasgd",), ("sync", "sgp", "adpsgd"), "time_to_target_s", LASGD),
    "assran": _rule("Assran et al. 2019", "SGP beats allreduce SGD on a slow (10 GbE-class) network", ("sgp",),
                    ("sync",), "time_to_target_s", ASSRAN, straggler="none", comm_share=(0.7, 1.0)),
    "ps-straggler": _rule("Hermans 2017; Paine et al. 2013", "asynchronous parameter-server methods keep their pace "
                          "beside a straggler where synchronous methods slow to it", PS, ("sync",), "straggler_pace",
                          "(no sentence of either paper says so: withdrawn, see async-straggler)", straggler="any"),
    "hermans-accuracy": _rule("Hermans 2017", "AGN and ADAG hold accuracy as staleness grows where DOWNPOUR degrades",
                              ("agn", "adag"), ("downpour",), "final_accuracy", HERMANS_N,
                              min_reference_staleness=2.0),
    "fast": _rule("Viviani et al. 2019", "FAST (neighbour gradient exchange, best-worker restarts) keeps accuracy "
                  "while avoiding global synchronisation", ("fast",), ("sync",), "final_accuracy", VIVIANI,
                  threshold=0.99),
    # the second regimes study's (registered before its runs; docs/statistics.md, docs/results/regimes/NOTES.md)
    "vishnu-wire": _rule("Vishnu et al. 2017", "delayed and layer-wise allreduce beat sync in throughput where sync's "
                         "communication is wire time (2 hosts at 0.9 of a core, links for shares 0.25-0.75)",
                         ("delayed", "layerwise"), ("sync",), "throughput", VISHNU, straggler="none",
                         comm_share=(0.25, 0.75), overlap_ceiling=True, workers=(2,)),
    "vishnu-wire-target": _rule("Vishnu et al. 2017", "delayed and layer-wise allreduce reach the target before sync "
                                "where sync's communication is wire time", ("delayed", "layerwise"), ("sync",),
                                "time_to_target_s", VISHNU, straggler="none", comm_share=(0.25, 0.75), workers=(2,)),
    "lasgd-every": _rule("LASGD, 2022", "LASGD reaches the target before sync and the gossip methods (SGP, AD-PSGD) "
                         "on every link, 4 workers", ("lasgd",), ("sync", "sgp", "adpsgd"), "time_to_target_s",
                         LASGD, straggler="none", workers=(4,)),
    "assran-slow": _rule("Assran et al. 2019", "SGP reaches the target before allreduce SGD on a slow network (sync's "
                         "communication share >= 0.7), 4 workers", ("sgp",), ("sync",), "time_to_target_s", ASSRAN,
                         straggler="none", comm_share=(0.7, 1.0), workers=(4,)),
    "async-straggler": _rule("Lian et al. 2018", "asynchronous methods (DOWNPOUR's parameter server, AD-PSGD's gossip) "
                             "reach the target before sync beside a straggler", ("downpour", "adpsgd"), ("sync",),
                             "time_to_target_s", LIAN, straggler="any"),
    "hermans-hyper": _rule("Hermans 2017", "AGN and ADAG end more accurate than DOWNPOUR over a learning-rate grid "
                           "shared by the three, at 2 and 4 workers", ("agn", "adag"), ("downpour",),
                           "final_accuracy", HERMANS, straggler="none"),
    "fast-target": _rule("Viviani et al. 2019", "FAST is non-inferior to sync in final accuracy (within 2 %: a margin "
                         "above the 0.7-point binomial noise of one accuracy on 1,000 held-out images)", ("fast",), ("sync",), "final_accuracy", VIVIANI, threshold=0.98,
                         straggler="none"),
    "fast-time": _rule("Viviani et al. 2019", "FAST reaches the target no later than sync (our reading of 'allow DNN "
                       "training to scale')", ("fast",), ("sync",), "time_to_target_s", VIVIANI, straggler="none"),
    # the latency study's (regimes-latency: predictions from the communication patterns, pipelines/studies)
    "latency-sgp": _rule("Assran et al. 2019", "SGP reaches the target before sync on links with a delay of 5 ms or "
                         "more", ("sgp",), ("sync",), "time_to_target_s", ASSRAN, delays=("5ms", "25ms")),
    "latency-adpsgd": _rule("Lian et al. 2018", "AD-PSGD trains faster (throughput) than sync on links with a delay "
                            "of 5 ms or more", ("adpsgd",), ("sync",), "throughput", LIAN_NET, delays=("5ms", "25ms")),
    "latency-diloco": _rule("Douillard et al. 2023", "DiLoCo reaches the target before sync on poorly connected links "
                            "(25 ms one way)", ("diloco",), ("sync",), "time_to_target_s", DILOCO, delays=("25ms",)),
    "latency-lasgd": _rule("LASGD, 2022", "LASGD reaches the target before sync on links with a delay of 5 ms or more",
                           ("lasgd",), ("sync",), "time_to_target_s", LASGD, delays=("5ms", "25ms")),
    # against the strongest synchronous baseline (regimes-latency-best, registered before its runs): the latency
    # claims judged against the better of sync and ddp in each cell (ddp pays about 16 one-way delays a step where
    # sync pays about 28), with a minimum effect worth reporting of 5 %, on the calibrated link only
    "latency-best-sgp": _rule("Assran et al. 2019", "SGP reaches the target at least 5 % before the best synchronous "
                              "method (sync or ddp) on links with a delay of 5 ms or more (the paper: 32 nodes on "
                              "10 GbE; here 4 hosts on a 118 Mbit link with a uniform delay)", ("sgp",),
                              ("sync", "ddp"), "time_to_target_s", ASSRAN, delays=("5ms", "25ms"), baseline="best",
                              min_effect=0.05),
    "latency-best-adpsgd": _rule("Lian et al. 2018", "AD-PSGD trains at least 5 % faster (throughput) than the best "
                                 "synchronous method (sync or ddp) on links with a delay of 5 ms or more (the paper's "
                                 "regime is a heterogeneous network; a uniform delay is a homogeneous one: the nearest "
                                 "we emulate)", ("adpsgd",), ("sync", "ddp"), "throughput", LIAN_NET,
                                 delays=("5ms", "25ms"), baseline="best", min_effect=0.05),
    "latency-best-diloco": _rule("Douillard et al. 2023", "DiLoCo reaches the target at least 5 % before the best "
                                 "synchronous method (sync or ddp) on poorly connected links (25 ms one way; the paper "
                                 "trains language models, here LeNet-5)", ("diloco",), ("sync", "ddp"),
                                 "time_to_target_s", DILOCO, delays=("25ms",), baseline="best", min_effect=0.05),
    "latency-best-lasgd": _rule("LASGD, 2022", "LASGD reaches the target at least 5 % before the best synchronous "
                                "method (sync or ddp) on links with a delay of 5 ms or more (the paper compares with "
                                "synchronous SGD on a datacenter network)", ("lasgd",), ("sync", "ddp"),
                                "time_to_target_s", LASGD, delays=("5ms", "25ms"), baseline="best", min_effect=0.05),
    # robustness as Hermans states it: the worst case over a learning-rate grid the three share, not superiority at
    # every point of it
    "hermans-robust": _rule("Hermans 2017", "AGN and ADAG are more robust to hyperparameters than DOWNPOUR: their "
                            "worst final accuracy over a learning-rate grid shared by the three is at least 5 % "
                            "higher than DOWNPOUR's", ("agn", "adag"), ("downpour",), "final_accuracy", HERMANS,
                            straggler="none", over_points="worst", min_effect=0.05),
    # the same, with the number of workers a distributed hyperparameter of the grid (the quote's "(distributed)"; the
    # thesis: DOWNPOUR's staleness grows with the workers): each method's worst over the learning rates and the
    # numbers of workers together, one test a subject (regimes-hermans-robust, registered before its runs)
    "hermans-robust-workers": _rule("Hermans 2017", "AGN and ADAG are more robust to (distributed) hyperparameters "
                                    "than DOWNPOUR: their worst final accuracy over a learning-rate grid and the "
                                    "numbers of workers, shared by the three, is at least 5 % higher than DOWNPOUR's",
                                    ("agn", "adag"), ("downpour",), "final_accuracy", HERMANS, straggler="none",
                                    over_points="worst_workers", min_effect=0.05),
    # the straggler claim from the paper's result sentence, AD-PSGD its subject, against the best synchronous method
    # on the same hosts and CPU (regimes-straggler; regimes' async-straggler quoted the introduction and gave
    # DOWNPOUR a fifth host)
    "straggler-best-adpsgd": _rule("Lian et al. 2018", "AD-PSGD reaches the target at least 5 % before the best "
                                   "synchronous method (sync or ddp) beside a straggler, every method on the same 4 "
                                   "hosts and CPU shares (the paper: up to 128 GPUs in a heterogeneous environment; "
                                   "here 4 workers, one at a third of the others' CPU)", ("adpsgd",), ("sync", "ddp"),
                                   "time_to_target_s", LIAN_RESULT, straggler="any", workers=(4,), baseline="best",
                                   min_effect=0.05),
    # the language model's slow-link claims against the strongest baseline (regimes-lm-v2: every method tuned on that
    # workload, a horizon from a pilot): LASGD against the best of every method it claims to beat that ran in the cell,
    # SGP against the best synchronous one; the slow link is the study's design (sync's communication share aimed at
    # 0.75), not a filter on a reference's share (ddp overlaps its allreduce with the backward pass, so its share is
    # not sync's)
    "lasgd-best": _rule("LASGD, 2022", "LASGD reaches the target at least 5 % before the best of sync, ddp and the "
                        "gossip methods (SGP, AD-PSGD) that ran in the cell, 4 workers without a straggler (the paper "
                        "compares with SGD and gossip on image classification; here a byte-level language model on a "
                        "link where sync's communication share is about 0.75)", ("lasgd",),
                        ("sync", "ddp", "sgp", "adpsgd"), "time_to_target_s", LASGD, straggler="none", workers=(4,),
                        baseline="best", min_effect=0.05),
    "sgp-slow-best": _rule("Assran et al. 2019", "SGP reaches the target at least 5 % before the best synchronous "
                           "method (sync or ddp), 4 workers without a straggler (the paper: 32 nodes on 10 GbE, ResNet-50; "
                           "here 4 hosts on a link where sync's communication share is about 0.75, a byte-level "
                           "language model)", ("sgp",), ("sync", "ddp"), "time_to_target_s", ASSRAN, straggler="none",
                           workers=(4,), baseline="best", min_effect=0.05),
}
"""The library of seed claims, each declared once, before the runs; a study names those it tests (its ``claims``),
and its registration copies them (:func:`as_record`)."""
LEGACY = ("vishnu", "lasgd", "assran", "ps-straggler", "hermans-accuracy", "fast")
"""The claims a study tests when its file names none (``claims: all``): those of the first regimes study."""


def select(names, where: str = "claims") -> tuple[Rule, ...]:
    """The rules a study names (``all``: :data:`LEGACY`); BenchError with one line for an unknown name."""
    names = LEGACY if names == "all" else tuple(names)
    bad = [n for n in names if n not in RULES]
    if bad:
        raise BenchError(f"{where} names {', '.join(map(repr, bad))}, which is no claim; valid: {', '.join(RULES)}")
    return tuple(RULES[n] for n in names)


def as_record(rule: Rule) -> dict:
    """A rule as a registration records it: every field, and its text."""
    return {**{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(rule).items()}, "text": rule.text()}

CELL = ["hardware", "workload", "link", "link_delay", "straggler", "np", "point"]
"""What makes a cell, beside the algorithm (a regimes cells table's columns; ``point``: the grid tag without the
repeat)."""


def with_straggler_pace(cells: pd.DataFrame) -> pd.DataFrame:
    """Add ``straggler_pace``: a run's throughput over that of the same algorithm, hardware, link, workers and repeat
    without a straggler (NaN for runs without one, or without that partner)."""
    df = cells.copy()
    if df.empty:
        df["straggler_pace"] = []
        return df
    same = ["algorithm", "hardware", "link", "link_delay", "np", "repeat"]
    calm = df[df["straggler"] == "none"].groupby(same)["throughput"].median()
    base = [calm.get(key, math.nan) for key in zip(*(df[c] for c in same))]
    df["straggler_pace"] = np.where(df["straggler"] != "none", df["throughput"] / np.asarray(base, dtype=float), math.nan)
    return df


def _cell_ok(rule: Rule, cell: dict, ref: pd.DataFrame) -> bool:
    if rule.straggler == "none" and cell["straggler"] != "none":
        return False
    if rule.straggler == "any" and cell["straggler"] == "none":
        return False
    if rule.links and cell["link"] not in rule.links:
        return False
    if rule.delays and cell.get("link_delay", "0ms") not in rule.delays:
        return False
    if rule.workers and "np" in cell and int(cell["np"]) not in rule.workers:
        return False
    if rule.comm_share is not None:
        s = float(ref["comm_share"].median()) if "comm_share" in ref else math.nan
        if not (math.isfinite(s) and rule.comm_share[0] <= s <= rule.comm_share[1]):
            return False
    if rule.min_reference_staleness is not None:
        tau = float(ref["mean_staleness"].median()) if "mean_staleness" in ref else math.nan
        if not (math.isfinite(tau) and tau >= rule.min_reference_staleness):
            return False
    return True


def _score(rule: Rule, rows: pd.DataFrame) -> float:
    """How good a reference is in a cell (higher: stronger): the median of the rule's metric over its repeats, a time
    to target of a run that never reached it counted as never (:attr:`Rule.baseline` ``best``)."""
    v = pd.to_numeric(rows[rule.metric], errors="coerce").astype(float)
    if rule.metric == "time_to_target_s" and "censored" in rows:
        v = v.where(~rows["censored"].fillna(False).astype(bool), math.inf)
    m = float(v.median())  # NaN where no run has a value: the weakest
    return -math.inf if math.isnan(m) else m if HIGHER_IS_BETTER.get(rule.metric, True) else -m


WORST = {"worst": ["point"], "worst_workers": ["np", "point"]}
"""What a method's worst is taken over, for each :attr:`Rule.over_points` that takes one: a cell's grid points, or its
grid points and numbers of workers together."""


def _points(rule: Rule, rows: pd.DataFrame) -> pd.Series:
    """Each row's point in the space the rule takes the worst over (:data:`WORST`), as text (``4/lr0.2`` where the
    workers count too)."""
    return rows[WORST[rule.over_points]].astype(str).agg("/".join, axis=1)


def _worst(rule: Rule, rows: pd.DataFrame, points: set) -> pd.DataFrame:
    """Per repeat, the row of ``rows`` with the worst value of the rule's metric over ``points`` (:func:`_points`; a
    missing value is the worst), its ``point`` set to ``worst of k`` (and its ``np`` to the workers it spans, ``2+4``,
    where they count: :attr:`Rule.over_points` ``worst_workers``)."""
    rows = rows[_points(rule, rows).isin(points).to_numpy()]
    higher = HIGHER_IS_BETTER.get(rule.metric, True)
    v = pd.to_numeric(rows[rule.metric], errors="coerce").astype(float).fillna(-math.inf if higher else math.inf)
    pick = (v.groupby(rows["repeat"]).idxmin() if higher else v.groupby(rows["repeat"]).idxmax()).to_numpy()
    worst = rows.loc[pick].assign(point=f"worst of {len(points)}")
    if "np" in WORST[rule.over_points]:
        worst["np"] = "+".join(str(n) for n in sorted(pd.unique(rows["np"])))
    return worst


def _cell_key(rule: Rule) -> list[str]:
    """What makes one of the rule's cells: :data:`CELL`, without what the rule takes a method's worst over."""
    return [c for c in CELL if c not in WORST.get(rule.over_points, [])]


def _pair(rule: Rule, g: pd.DataFrame, subject: str, reference: str) -> pd.DataFrame:
    """The subject's rows of cell ``g`` merged with the reference's on the repeat (each side's worst over the points
    both ran, where the rule takes the worst: :func:`_worst`); empty where one of them did not run there."""
    sub, ref = g[g["algorithm"] == subject], g[g["algorithm"] == reference]
    if rule.over_points in WORST:
        shared = set(_points(rule, sub)) & set(_points(rule, ref))
        if not shared:
            return sub.iloc[:0]
        sub, ref = _worst(rule, sub, shared), _worst(rule, ref, shared)
    return sub.merge(ref, on="repeat", suffixes=("", "_ref"))


def _rows(rule: Rule, cells: pd.DataFrame) -> pd.DataFrame:
    """The runs of ``cells`` the rule reads: with ``straggler_pace`` where that is its metric, and only the rule's
    numbers of workers where a cell spans several (:attr:`Rule.over_points` ``worst_workers``)."""
    df = with_straggler_pace(cells) if rule.metric == "straggler_pace" else cells
    if rule.workers and "np" not in _cell_key(rule):
        df = df[df["np"].astype(int).isin(rule.workers)]
    return df


def tests(rule: Rule, cells: pd.DataFrame) -> pd.DataFrame:
    """The rule's tests in ``cells`` (a regimes cells table with ``repeat`` and ``point``): one row per subject,
    reference and cell with the paired ratio, n, the ceiling where it applies and the one-sided p-values before
    the Holm correction (:func:`verdict` applies it across the tests it judges). With :attr:`Rule.baseline` ``best``
    only the strongest reference of each cell is tested; with :attr:`Rule.over_points` ``worst`` a cell is its grid
    points together (``worst_workers``: its grid points and numbers of workers), each method's worst over the points
    both it and the reference ran."""
    cols = [*CELL, "subject", "reference", "baseline", "effect", "ci_low", "ci_high", "n", "ceiling", "p_support",
            "p_contradict", "censored", "censored_ref", "censored_both"]
    if rule.over_points in WORST and rule.metric == "time_to_target_s":
        raise BenchError(f"{rule.claim}: over_points '{rule.over_points}' needs a metric with a value in every run, "
                         f"not {rule.metric} (a run that never reached the target has none)")
    if rule.over_points not in ("each", *WORST):
        raise BenchError(f"{rule.claim}: over_points {rule.over_points!r} is not one of each, {', '.join(WORST)}")
    if cells.empty:
        return pd.DataFrame(columns=cols)
    df = _rows(rule, cells)
    rows, key = [], _cell_key(rule)
    for keys, g in df.groupby(key, sort=True, dropna=False):
        cell = dict(zip(key, keys))
        refs = [(r, g[g["algorithm"] == r]) for r in rule.references]
        refs = [(r, rows_) for r, rows_ in refs if not rows_.empty and _cell_ok(rule, cell, rows_)]
        how = "every reference"
        if rule.baseline == "best" and refs:
            scores = {r: _score(rule, rows_) for r, rows_ in refs}
            refs = [max(refs, key=lambda item: scores[item[0]])]
            how = f"the best of {', '.join(scores)} here by median {rule.metric}"
        for reference, ref in refs:
            s = float(ref["comm_share"].median()) if "comm_share" in ref else math.nan
            ceiling = 1.0 / max(s, 1.0 - s) if rule.overlap_ceiling and math.isfinite(s) else math.nan
            for subject in rule.subjects:
                both = _pair(rule, g, subject, reference)
                if both.empty:
                    continue
                r = _ratio(rule, both)
                rows.append({**cell, "np": both["np"].iloc[0], "point": both["point"].iloc[0], "subject": subject,
                             "reference": reference,
                             "baseline": f"{reference} ({how})", "effect": r["effect"], "ci_low": r["ci_low"],
                             "ci_high": r["ci_high"], "n": r["n"], "ceiling": ceiling, "p_support": r["p_above"],
                             "p_contradict": r["p_below"],
                             **{k: r.get(k, 0) for k in ("censored", "censored_ref", "censored_both")}})
    return pd.DataFrame(rows, columns=cols)


def _in_cells(cells: pd.DataFrame, keys: set[tuple[str, ...]], columns: list[str] = CELL) -> pd.DataFrame:
    """The rows of ``cells`` whose ``columns`` (a cell's, :data:`CELL` by default), as text, are one of ``keys``."""
    return cells[[k in keys for k in cells[columns].astype(str).itertuples(index=False, name=None)]]


def _ratio(rule: Rule, both: pd.DataFrame) -> dict:
    """The paired ratio of the rule's metric over ``both`` (a subject's rows merged with its reference's on the
    repeat; a time to target with its censored runs, :func:`bench.metrics.stats.censored_ratio`)."""
    if rule.metric == "time_to_target_s":
        return censored_ratio(both, rule.metric, rule.bar())
    return paired_ratio(both[rule.metric], both[f"{rule.metric}_ref"], HIGHER_IS_BETTER.get(rule.metric, True),
                        rule.bar())


def leave_one_out(rule: Rule, cells: pd.DataFrame, decide) -> tuple[float, float]:
    """:data:`LOO_COLUMNS` of the deciding test ``decide`` (a row of :func:`tests`): its bound on the bar's side
    recomputed with each repeat left out in turn, (lowest, highest); NaN where fewer than :data:`MIN_N` pairs would
    remain (no interval: a verdict on 3 pairs has no seed to spare)."""
    df = _rows(rule, cells)
    key = _cell_key(rule)
    g = _in_cells(df, {tuple(pd.Series([decide[k] for k in key], dtype=object).astype(str))}, key)
    both = _pair(rule, g, decide["subject"], decide["reference"])
    side = "ci_low" if decide["effect"] >= rule.bar() else "ci_high"
    bounds = []
    for k in sorted(both["repeat"].unique()):
        r = _ratio(rule, both[both["repeat"] != k])
        if r["n"] >= MIN_N and math.isfinite(r[side]):
            bounds.append(r[side])
    return (min(bounds), max(bounds)) if bounds else (math.nan, math.nan)


def _cpu_note(rule: Rule, cells: pd.DataFrame) -> str:
    """Where the methods compared had different total CPU (an emulated parameter server is a host more), the
    difference, in every verdict (``cpu_cores``: the sum of the hosts' shares); ``cells``: those of the rule's tests
    only (sync at 2 hosts of 0.9 of a core is not sync at 4 of 0.36)."""
    if "cpu_cores" not in cells:
        return ""
    cores = {a: cells.loc[cells["algorithm"] == a, "cpu_cores"].median() for a in (*rule.subjects, *rule.references)}
    known = {a: c for a, c in cores.items() if isinstance(c, float) and math.isfinite(c)}
    if len(set(known.values())) <= 1:
        return ""
    return "; unequal CPU: " + ", ".join(f"{a} {c:g} cores" for a, c in known.items())


def _delay(row) -> str:
    """`` +<delay>`` of a test's link in the evidence, nothing where there is no delay."""
    delay = getattr(row, "link_delay", "0ms")
    return "" if delay in ("", "0ms") or not isinstance(delay, str) else f" +{delay}"


def _censored(row) -> str:
    """What a test's effect is where runs never reached the target (:func:`bench.metrics.stats.censored_ratio`): in
    the pairs compared, a bound, not a value, said beside it; the pairs where neither run reached it are left out
    (nothing said where every run reached it)."""
    if not (row.censored or row.censored_ref or row.censored_both):
        return ""
    bound = ("an upper bound: it cannot support" if row.censored and not row.censored_ref else
             "a lower bound: it cannot contradict" if row.censored_ref and not row.censored else
             "bounds both ways: it can neither support nor contradict" if row.censored else "a value")
    both = f"; {row.censored_both} pair(s) where neither did left out" if row.censored_both else ""
    return (f" (never reached the target in the {row.n} pairs compared: {row.subject} in {row.censored}, "
            f"{row.reference} in {row.censored_ref}{both}; the effect is {bound})")


def _fmt(v: float, spec: str = ".2f") -> str:
    return "n/a" if v is None or not math.isfinite(float(v)) else format(float(v), spec)


def verdict(rule: Rule, cells: pd.DataFrame) -> dict:
    """One row of claims.csv: the rule's verdict from its tests in ``cells`` (module docstring)."""
    t = tests(rule, cells)
    row = {"source": rule.source, "claim": rule.claim, "effect": math.nan, "ci_low": math.nan, "ci_high": math.nan,
           "n": 0, "rule": rule.text(), "tests": len(t)}
    if t.empty:
        return {**row, "verdict": "not testable here",
                "evidence": f"the study has no cell of this rule ({', '.join(rule.subjects)} beside "
                            f"{', '.join(rule.references)} where the rule applies); {PUBLISHED}"}
    lines = [f"{r.subject} vs {r.reference} at {r.link}{_delay(r)}/{r.straggler}/np{r.np}{'/' + r.point if r.point else ''}: "
             f"x{_fmt(r.effect)} [{_fmt(r.ci_low)}, {_fmt(r.ci_high)}], n={r.n}"
             + (f", ceiling {_fmt(r.ceiling)}" if math.isfinite(r.ceiling) else "") + _censored(r)
             for r in t.itertuples()]
    few = t["n"] < MIN_N
    if few.all():
        worst = t.loc[t["n"].idxmin()]
        return {**row, "effect": worst["effect"], "n": int(worst["n"]), "verdict": "not testable here",
                "evidence": f"fewer than {MIN_N} repeats in {int(few.sum())} of {len(t)} tests (no "
                            f"interval; set the study's repeats): " + "; ".join(lines)}
    left_out = (f"; {int(few.sum())} test(s) with fewer than {MIN_N} repeats left out: "
                + "; ".join(line for line, f in zip(lines, few) if f)) if few.any() else ""
    lines = [line for line, f in zip(lines, few) if not f]
    t = t[~few].copy()
    t["p_support"], t["p_contradict"] = holm(t["p_support"]), holm(t["p_contradict"])  # across the judged tests
    row["tests"] = len(t)
    above_ceiling = t["ci_low"] > t["ceiling"]  # NaN ceiling: False
    support = (t["p_support"] < ALPHA) & ~above_ceiling
    contradict = t["p_contradict"] < ALPHA
    if contradict.any():
        decide, v = t[contradict].loc[lambda d: d["effect"].idxmin()], "not reproduced"
    else:
        decide = t.loc[t["effect"].idxmin()]
        v = "reproduced" if support.all() else "inconclusive"
    notes = f"; {int(above_ceiling.sum())} test(s) above the ceiling (measurement suspect)" if above_ceiling.any() else ""
    key = _cell_key(rule)
    tested = set(t[key].astype(str).itertuples(index=False, name=None))  # the CPU of the cells the tests compared
    notes += _cpu_note(rule, _in_cells(cells, tested, key))
    loo_low, loo_high = leave_one_out(rule, cells, decide)
    return {**row, "effect": decide["effect"], "ci_low": decide["ci_low"], "ci_high": decide["ci_high"],
            "n": int(decide["n"]), "verdict": v, "loo_low": loo_low, "loo_high": loo_high, "baseline": decide["baseline"],
            "evidence": f"{int(support.sum())} of {len(t)} tests support, {int(contradict.sum())} contradict "
                        f"(Holm){notes}: " + "; ".join(lines) + left_out}


def not_as_registered(rule: Rule, registration: dict | None) -> str:
    """Why ``rule`` is not the rule ``registration`` recorded (:func:`as_record`: every field and its text), or ``""``
    where it is, or where there is no registration or it records no rules (a registration written before it did)."""
    recorded = (registration or {}).get("claims")
    if not isinstance(recorded, list):
        return ""
    now = as_record(rule)
    defaults = as_record(Rule(rule.source, rule.claim, rule.subjects, rule.references, rule.metric))
    same = [r for r in recorded if isinstance(r, dict) and (r.get("source"), r.get("claim")) == (rule.source, rule.claim)]
    if not same:
        return "the registration does not record this rule: its verdict is exploratory"
    # a field a registration older than it does not record is the default it had then
    fields = sorted(k for k in set(now) | set(same[0])
                    if now.get(k) != same[0].get(k, defaults.get(k) if k != "text" else None))
    return (f"the rule differs from the registered one ({', '.join(fields)}): its verdict is exploratory"
            if fields else "")


METRIC_DEFAULTS = {"target_window": 1}
"""What a registration written before a metric setting existed measured with: the setting's default then."""


def registered_metric(registration: dict | None, key: str):
    """The value of metric setting ``key`` a registration measured with: its ``metrics``' value, else
    :data:`METRIC_DEFAULTS`' (a registration written before the setting existed, or none)."""
    recorded = (registration or {}).get("metrics")
    return (recorded if isinstance(recorded, dict) else {}).get(key, METRIC_DEFAULTS.get(key))


def metrics_not_as_registered(metrics: dict | None, registration: dict | None) -> str:
    """Why the metric settings the cells were computed with (``metrics``: ``target_accuracy``, ``target_window``)
    are not the registration's (its ``metrics``; a setting it does not record is :data:`METRIC_DEFAULTS`' value), or
    ``""`` where they are, or where either is not given."""
    recorded = (registration or {}).get("metrics")
    if not metrics or not isinstance(recorded, dict):
        return ""
    differ = [f"{k} {v!r}, registered {registered_metric(registration, k)!r}" for k, v in metrics.items()
              if registered_metric(registration, k) != v]
    return f"measured with {'; '.join(differ)}: its verdict is exploratory" if differ else ""


def claims(cells: pd.DataFrame, rules: tuple[Rule, ...] | None = None, registration: dict | None = None,
           metrics: dict | None = None) -> pd.DataFrame:
    """claims.csv: one row per rule and workload (:data:`COLUMNS`). Under a ``registration``
    (:func:`bench.registration.load`) only the runs it allows carry a verdict (the cells' ``judged`` is empty: clean,
    made under it after it was committed, in a cell it lists); the others are counted in the evidence. Without one,
    every verdict is ``exploratory``: nothing shows that its rule was written before its runs; nor where the rule is
    not the one the registration recorded (:func:`not_as_registered`: a threshold or cell changed after the runs), nor
    where the cells' ``metrics`` (the target and its window) are not the registered ones
    (:func:`metrics_not_as_registered`)."""
    rules = select("all") if rules is None else rules
    workloads = sorted(set(cells["workload"])) if "workload" in cells and not cells.empty else [""]
    measured = metrics_not_as_registered(metrics, registration)
    rows = []
    for rule in rules:
        changed = "; ".join(w for w in (not_as_registered(rule, registration), measured) if w)
        for workload in workloads:
            sub = cells[cells["workload"] == workload] if workload else cells
            usable = sub[sub["judged"].fillna("") == ""] if registration is not None and "judged" in sub else sub
            row = verdict(rule, usable)
            row.update(quote=rule.quote, workload=workload, interval_method=INTERVAL,
                       registration=registration["sha256"][:12] if registration else "none")
            if len(usable) < len(sub):
                reasons = sub.loc[sub["judged"].fillna("") != "", "judged"].value_counts()
                row["evidence"] += "; not judged: " + ", ".join(f"{n} run(s) {why}" for why, n in reasons.items())
            if (registration is None or changed) and row["verdict"] != "not testable here":
                row["verdict"] = f"exploratory: {row['verdict']}"
            if changed:
                row["evidence"] += f"; {changed}"
            rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


NOT_REGISTERED = "not registered on this workload: its study does not run this claim's cells"
"""The evidence of a claim's row for a workload whose study did not register the claim (:func:`every_workload`)."""


def every_workload(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """Several studies' claims.csv as one table with a row per claim and workload: grouped by claim (in order of first
    appearance), a claim that a workload's study did not register gets a ``not testable here`` row saying so
    (:data:`NOT_REGISTERED`), so that a reader sees on which workloads each verdict holds and on which it was not
    tried."""
    table = pd.concat(tables, ignore_index=True)
    if table.empty:
        return table
    workloads = list(dict.fromkeys(table["workload"]))
    rows = []
    for _, claim in table.groupby(["source", "claim"], sort=False):
        first = claim.iloc[0]
        for workload in workloads:
            have = claim[claim["workload"] == workload]
            if have.empty:
                rows.append({**first.to_dict(), "workload": workload, "effect": math.nan, "ci_low": math.nan,
                             "ci_high": math.nan, "n": 0, "tests": 0, "verdict": "not testable here",
                             "registration": "none", "evidence": NOT_REGISTERED})
            else:
                rows += have.to_dict("records")
    return pd.DataFrame(rows, columns=table.columns)
