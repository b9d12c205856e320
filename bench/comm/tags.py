"""Every point-to-point tag of the suite, in one place: its number, who sends it to whom and what it carries.

A receive (:class:`bench.comm.p2p.P2P`) matches a message by its sender, its process group and its tag, so two
protocols whose messages could meet on one group must not share a tag. The numbers are kept apart across the whole
suite, whatever the group, so that a message that reaches the wrong protocol is never taken for one of its own
(:data:`TAGS` lists them; a test checks that they differ and that no module passes a bare number).
"""

from __future__ import annotations

# -- gossip rounds (P2P.exchange, on the job's default channel) ------------------------------------------------
SGP_SHARE = 51
"""SGP (bench.algorithms.sgp), worker -> each out-peer of the round: its mixed numerator and weight [x_i, w_i]."""
FAST_GRADIENT = 53
"""FAST (bench.algorithms.fast), worker -> each neighbour: its gradient g_i^t (flat)."""

# -- AD-PSGD's pairwise averaging (bench.comm.pairwise, on a channel of its own) -------------------------------
PAIRWISE_HEADER = 61
"""active -> passive: a request header [MAGIC, AVG or DONE, active rank, step] (int64)."""
PAIRWISE_DATA = 62
"""active -> passive: the active's model x_active (flat)."""
PAIRWISE_REPLY = 63
"""passive -> active: the passive's model x_passive (flat), the end of the exchange."""

# -- the parameter server (bench.comm.ps, on the job's default channel) ----------------------------------------
PS_HEADER = 101
"""worker -> server: a message header [MAGIC, kind, worker rank, clock, numel, flags] (int64)."""
PS_DATA = 102
"""worker -> server: a COMMIT's payload (float32), or with SNAP and DONE the model's buffers (float32)."""
PS_REPLY = 103
"""server -> worker: the reply [clock, tau, updates] (int64) to a PULL or a COMMIT."""
PS_CENTRE = 104
"""server -> worker: the centre θ̃ (float32), for a PULL or a COMMIT with F_PULL."""

# -- the suite's own benchmarks ---------------------------------------------------------------------------------
PERF_PS_GO = 9
"""bench.perf.ps, server -> each worker: the server of a round is gone, the next round may start (float32[1])."""

TAGS = {name: value for name, value in globals().items() if name.isupper() and isinstance(value, int)}
"""Every tag by name."""
