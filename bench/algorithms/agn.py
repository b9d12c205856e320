"""AGN: Accumulated Gradient Normalization.

References:
    Hermans, "On Scalable Deep Learning and Parallelizing Gradient Descent", master's thesis,
    Université de Liège, 2017, chapter on Accumulated Gradient Normalization. (dist-keras
    ships this rule under the class name ADAG; the thesis's naming is followed here.)

Update rule (docs/algorithms.md, ``agn``): pull θᵏ ← θ̃; a = 0; λ = ``communication_window`` times
{ take a local Opt step g (θᵏ ← θᵏ + g); a += g }; commit a/λ and pull again (one round trip).
The server applies θ̃ ← θ̃ + a/λ. λ = 1 is DOWNPOUR; the thesis's heuristic is
λ ≈ (n + number of layers)/2.
"""

from __future__ import annotations

from .ps_base import CommitWindow


class AGN(CommitWindow):
    name = "agn"
    paper = "AGN: accumulated gradient normalization, commit a/λ (Hermans 2017)"

    def commit_scale(self) -> float:
        return 1.0 / self.p.communication_window
