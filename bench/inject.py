"""What the worker injects around every algorithm's step alike: stragglers (a product feature) and, from the
environment, faults and slow evaluations (test aids, inert unless their variable is set).

Stragglers (``slow_ranks``, ``slow_factor``, ``step_jitter_s``): right after a step the worker sleeps
(slow_factor − 1) × the compute it measured in that step (plus a seeded exponential jitter), inside the step's
timing, so the delay counts as compute (``injected_s`` says how much) in every throughput and time-to-accuracy
figure. With ``slow_mode: cpu`` a straggler does not sleep: its emulated host has a smaller CPU share
(bench.launch).
"""

from __future__ import annotations

import os
import random
import signal
import time

FAULT_ENV = "BENCH_INJECT_FAULT"  # "RANK:STEP:raise|kill[:RUN]" — test aid: fail rank RANK at step STEP (of run RUN)
EVAL_DELAY_ENV = "BENCH_EVAL_DELAY_S"  # test aid: seconds added to every held-out evaluation (a slow evaluation)


class Straggler:
    """One worker's injected delay: (slow_factor − 1) × the step's compute if it is a straggler, plus jitter.
    ``host_is_slower``: the straggler is a slower emulated host (``slow_mode: cpu``), so it does not sleep."""

    def __init__(self, train, worker_index: int, host_is_slower: bool = False):
        slow = worker_index in train.slow_ranks and not host_is_slower
        self.factor = train.slow_factor if slow else 1.0
        self.jitter = train.step_jitter_s
        self.rng = random.Random(f"{train.seed}/jitter/{worker_index}")

    def delay(self, compute_s: float) -> float:
        """Sleep after a step whose compute took ``compute_s``; returns the seconds slept."""
        seconds = (self.factor - 1.0) * compute_s + (self.rng.expovariate(1.0 / self.jitter) if self.jitter else 0.0)
        if seconds <= 0:
            return 0.0
        t0 = time.perf_counter()
        time.sleep(seconds)
        return time.perf_counter() - t0


class Faults:
    """The test aids of the environment, read once per run: a fault to inject, a delay for every evaluation."""

    def __init__(self, env=os.environ):
        self.fault = env.get(FAULT_ENV) or ""
        self.eval_delay_s = float(env.get(EVAL_DELAY_ENV, 0) or 0)

    def before_step(self, rank: int, step: int, run: str) -> None:
        """Fail here if the fault names this rank, step (and run): ``raise`` an error or ``kill`` the process."""
        if not self.fault:
            return
        r, s, mode, *only = self.fault.split(":")
        if int(r) == rank and int(s) == step and (not only or only[0] == run):
            if mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"injected fault at step {step}")

    def before_evaluation(self) -> None:
        if self.eval_delay_s:
            time.sleep(self.eval_delay_s)
