"""DiLoCo: H inner steps per worker, then an outer optimizer on the averaged outer gradient; Streaming DiLoCo option.

References:
    Douillard, Feng, Rusu, Chhaparia, Donchev, Kuncoro, Ranzato, Szlam and Shen, "DiLoCo: Distributed
    Low-Communication Training of Language Models", arXiv:2311.08105, 2023 (Algorithm 1).
    Douillard, Donchev, Rush, Kale, Charles, Garrett, Teston, Lacey, McIlroy, Shen, Ramé, Szlam,
    Ranzato and Barham, "Streaming DiLoCo with overlapping communication: Towards a Distributed Free
    Lunch", arXiv:2501.18512, 2025.

Update rule (docs/algorithms.md, ``diloco``). θ̃ is the outer (global) parameter vector, the same on
every rank; θᵏ worker k's parameters; H = ``communication_window``::

    H times:   θᵏ ← InnerOpt(θᵏ, ∇L(θᵏ; B_k))                       (no communication)
    then:      Δ = mean_k (θ̃ − θᵏ)                                 (one blocking allreduce, the outer gradient)
               u ← μ·u + Δ;   θ̃ ← θ̃ − η_out·(Δ + μ·u)  (Nesterov)  or  θ̃ ← θ̃ − η_out·u  (heavy ball)
               θᵏ ← θ̃                                               (every worker restarts from θ̃)

The outer step is ``torch.optim.SGD(lr=outer_lr, momentum=outer_momentum, nesterov=outer_nesterov)``
applied to θ̃ with gradient Δ (u starts at 0, so the first step has u = Δ, as torch's buffer), written
out on flat vectors (:func:`outer_sgd_`). With ``outer_lr`` 1 and ``outer_momentum`` 0,
θ̃ ← θ̃ − mean_k(θ̃ − θᵏ) = mean_k θᵏ: exactly ``localsgd`` with λ = H (to float rounding).

Streaming (``streaming: true``, Streaming DiLoCo): the flat parameter vector is cut into P =
``stream_fragments`` contiguous fragments of (nearly) equal size; fragment p is exchanged after the
local steps t (counted from 1) with (t − o_p) mod H = 0, o_p = ⌊p·H/P⌋, so the fragments take turns
and each exchange carries about 1/P of the model. Its outer gradient Δ_p = θ̃_p − θᵏ_p is computed at t and
its mean-allreduce started without blocking; the workers go on with τ = ``stream_overlap`` more inner
steps; after step t + τ the reduction is waited for, the outer optimizer updates θ̃_p (with its own slice
of u) and the local fragment is merged: θᵏ_p ← α·θᵏ_p + (1 − α)·θ̃_p, α = ``stream_mixing``. With τ = 0 the
reduction is blocking and applied at once. P = 1, τ = 0, α = 0 is plain DiLoCo.

Inferred (documented in docs/algorithms.md):

- the inner optimizer: the paper uses AdamW; ``inner_optimizer: run`` (default) uses the run's own
  ``optimizer`` setting (so every algorithm of a study trains with the same local optimizer, and the
  equality with ``localsgd`` holds), ``adamw`` uses ``torch.optim.AdamW`` with the run's ``lr`` and
  ``weight_decay`` (the paper's LM runs use lr 4e-4 and weight decay 0.1: set them with ``--set``).
  Inner optimizer state is never exchanged nor reset at an outer step (Algorithm 1 keeps it).
- fragments: the paper groups transformer blocks (strided); this suite's models have layers of very
  unequal size (the laptop MLP: 100,480 and 1,290 parameters), so fragments are equal slices of the flat
  vector, which keeps the point of streaming (each exchange ≈ 1/P of the model). The outer optimizer is
  element-wise, so any partition gives the same rule per element.
- the schedule's offsets o_p = ⌊p·H/P⌋ (fragment 0 at t = H, 2H, ...; fragment p first at t = o_p);
  within a step, exchanges due for merging are applied before new ones start.
- the pseudo-gradient exchange is float32 (the paper also quantises it to 4-bit floats: not done here).
- end of training: ``finalize`` completes the exchanges in flight (applied as if τ had elapsed), then, if
  inner steps were taken since a fragment's last exchange, makes one blocking outer step on the whole
  vector (every fragment) and restarts every worker from θ̃, so the final θ̃ includes every inner step.

Evaluated model: θ̃, the outer parameters (rank 0's copy, identical on every rank; rank 0's buffers), which
is what DiLoCo deploys. Between outer steps it is the last outer iterate, not the (unsynchronised) mean of
the workers' replicas; in streaming mode its fragments were updated at different steps.

Timing: a blocking allreduce is ``comm``; in streaming mode computing Δ_p and starting its reduction is
``comm`` and blocking on it τ steps later is ``wait``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from .. import BenchError, vectors
from .averaging import WindowedAveraging
from .base import window_params


def outer_sgd_(theta: torch.Tensor, buf: torch.Tensor, delta: torch.Tensor, lr: float, momentum: float,
               nesterov: bool) -> None:
    """One step of ``torch.optim.SGD(lr, momentum, nesterov)`` on ``theta`` with gradient ``delta``, in place;
    ``buf`` is the momentum buffer (zeros before the first step, which then equals torch's buf = Δ)."""
    buf.mul_(momentum).add_(delta)
    step = delta.add(buf, alpha=momentum) if nesterov else buf
    theta.sub_(step, alpha=lr)


def fragment_slices(numel: int, fragments: int) -> list[slice]:
    """``fragments`` contiguous slices of (nearly) equal length covering 0..numel-1."""
    bounds = [p * numel // fragments for p in range(fragments + 1)]
    return [slice(bounds[p], bounds[p + 1]) for p in range(fragments)]


def fragment_offsets(window: int, fragments: int) -> list[int]:
    """o_p = ⌊p·H/P⌋: fragment p is exchanged after local steps t ≥ 1 with (t − o_p) mod H = 0."""
    return [p * window // fragments for p in range(fragments)]


class DiLoCo(WindowedAveraging):
    name = "diloco"
    paper = "DiLoCo: H inner steps, Nesterov outer step on the mean outer gradient; streaming option (Douillard et al. 2023, 2025)"
    averaged_evaluation = False  # the evaluated model is θ̃, the same on every rank

    @dataclass
    class Params(window_params(8)):
        """``communication_window`` H: inner optimizer steps between two outer steps (paper: 500 on language models)."""

        outer_lr: float = 0.7
        """η_out: learning rate of the outer SGD (paper: 0.7)."""
        outer_momentum: float = 0.9
        """μ: momentum of the outer SGD (paper: 0.9; 0 with outer_lr 1 is localsgd)."""
        outer_nesterov: bool = True
        """Nesterov outer momentum (paper: true); false: heavy-ball (then diloco equals slowmo)."""
        inner_optimizer: Literal["run", "adamw"] = "run"
        """run: the run's own optimizer setting; adamw: torch AdamW with the run's lr and weight_decay (the paper's)."""
        streaming: bool = False
        """Streaming DiLoCo: fragments exchanged in turn, overlapped with stream_overlap inner steps."""
        stream_fragments: int = 2
        """P (streaming only): fragments of the parameter vector, 1 <= P <= H."""
        stream_overlap: int = 1
        """τ (streaming only): inner steps between starting a fragment's exchange and applying it, 0 <= τ < H."""
        stream_mixing: float = 0.5
        """α (streaming only): merged fragment = α·local + (1 − α)·outer, 0 <= α <= 1 (0: replaced by the outer)."""

    @classmethod
    def validate(cls, params, cfg) -> None:
        super().validate(params, cfg)
        p = params
        if not p.outer_lr > 0:
            raise BenchError(f"diloco: outer_lr must be > 0, got {p.outer_lr!r}")
        if not 0 <= p.outer_momentum < 1:
            raise BenchError(f"diloco: outer_momentum must be in [0, 1), got {p.outer_momentum!r}")
        if not p.streaming:
            return
        h = p.communication_window
        if not 1 <= p.stream_fragments <= h:
            raise BenchError(f"diloco: stream_fragments must be an integer in [1, communication_window={h}] "
                             f"(one fragment per offset), got {p.stream_fragments!r}")
        if not 0 <= p.stream_overlap < h:
            raise BenchError(f"diloco: stream_overlap must be an integer in [0, communication_window={h}) "
                             f"(a fragment's exchange completes before its next one), got {p.stream_overlap!r}")
        if not 0 <= p.stream_mixing <= 1:
            raise BenchError(f"diloco: stream_mixing must be in [0, 1], got {p.stream_mixing!r}")

    def setup(self, model, optimizer):
        if self.p.inner_optimizer == "adamw":
            t = self.ctx.cfg.train
            optimizer = torch.optim.AdamW(model.parameters(), lr=t.lr, weight_decay=t.weight_decay)
        super().setup(model, optimizer)  # comm: broadcast rank 0's parameters and optimizer state to every worker
        self.outer = vectors.flat(model.parameters())  # θ̃, the same on every rank
        self.buf = torch.zeros_like(self.outer)  # u, the outer momentum
        p = self.p
        fragments, self.tau, self.alpha = (p.stream_fragments, p.stream_overlap, p.stream_mixing) if p.streaming else (1, 0, 0.0)
        self.slices = fragment_slices(self.outer.numel(), fragments)
        self.offsets = fragment_offsets(p.communication_window, fragments)
        self.inflight: dict[int, tuple[int, object, torch.Tensor]] = {}  # fragment -> (t sent, handle, Δ buffer)
        self.last_sent = [0] * fragments
        self.sync_log: list[tuple[int, int, int]] = []  # (fragment, t sent, t applied)
        self.outer_steps = 0  # outer updates of a fragment (the whole vector when not streaming)
        self.late = 0  # exchanges not complete when their τ steps had passed

    # -- the outer step on one slice -------------------------------------------------------
    def _apply(self, sl: slice, delta: torch.Tensor, alpha: float) -> None:
        """θ̃_sl ← OuterOpt(θ̃_sl, Δ); θᵏ_sl ← α·θᵏ_sl + (1 − α)·θ̃_sl."""
        p = self.p
        outer_sgd_(self.outer[sl], self.buf[sl], delta, p.outer_lr, p.outer_momentum, p.outer_nesterov)
        theta = vectors.flat(self.model.parameters())
        theta[sl] = self.outer[sl] if alpha == 0 else alpha * theta[sl] + (1 - alpha) * self.outer[sl]
        vectors.assign_(self.model.parameters(), theta)
        self.outer_steps += 1

    def _exchange_now(self, sl: slice, name: str) -> None:
        """Blocking: Δ = mean_k(θ̃ − θᵏ) on the slice, outer step, workers restart from θ̃ on the slice."""
        with self.ctx.timer.comm():
            delta = self.outer[sl] - vectors.flat(self.model.parameters())[sl]
            self.comm.allreduce_(delta, name=name)  # comm: allreduce the outer gradient over all workers: Δ = mean_k (θ̃ − θᵏ)
        self._apply(sl, delta, 0.0)

    def _start(self, frag: int) -> None:
        sl = self.slices[frag]
        with self.ctx.timer.comm():
            delta = self.outer[sl] - vectors.flat(self.model.parameters())[sl]
            handle = self.comm.allreduce_async_(delta, name=f"diloco.fragment{frag}")  # comm: start the allreduce (mean over all workers) of fragment p's Δ_p, in flight for τ steps
        self.inflight[frag] = (self.t, handle, delta)

    def _finish(self, frag: int) -> None:
        sent, handle, delta = self.inflight.pop(frag)
        if not self.comm.poll(handle):  # comm: ask whether the fragment's allreduce has completed (never blocks)
            self.late += 1
        with self.ctx.timer.wait():
            self.comm.synchronize(handle)  # comm: wait for the fragment's mean outer gradient over all workers
        self._apply(self.slices[frag], delta, self.alpha)
        self.sync_log.append((frag, sent, self.t))

    def communicate(self) -> int:
        """After the local step: apply the exchanges whose τ steps have passed, start (or make) the fragments' due ones."""
        h = self.p.communication_window
        for frag in sorted(self.inflight, key=lambda f: self.inflight[f][0]):
            if self.inflight[frag][0] + self.tau <= self.t:
                self._finish(frag)
        sent = 0
        for frag, offset in enumerate(self.offsets):
            if self.t >= offset and (self.t - offset) % h == 0:
                sl = self.slices[frag]
                if self.tau == 0:
                    self._exchange_now(sl, f"diloco.fragment{frag}")
                    self.sync_log.append((frag, self.t, self.t))
                else:
                    self._start(frag)
                self.last_sent[frag] = self.t
                sent += (sl.stop - sl.start) * self.outer.element_size()
        return sent

    def finalize(self) -> None:  # its own leftover rule: every fragment's exchange in flight, then the whole vector
        for frag in sorted(self.inflight, key=lambda f: self.inflight[f][0]):
            self._finish(frag)
        if self.t > min(self.last_sent):
            self._exchange_now(slice(0, self.outer.numel()), "diloco.final")

    def eval_theta(self) -> torch.Tensor:
        return self.outer

    def stats(self) -> dict:
        if self.comm.rank != 0:
            return {}
        out = {"outer_steps": self.outer_steps}
        if self.p.streaming:
            out.update(fragment_exchanges=[sum(1 for f, _, _ in self.sync_log if f == p) for p in range(len(self.slices))],
                       fragment_sizes=[s.stop - s.start for s in self.slices], exchanges_late=self.late)
        return out
