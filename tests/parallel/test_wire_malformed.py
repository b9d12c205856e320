"""Gossip and pairwise messages under malformed input, over the real transport (horovodrun -np 2; issue 40, item 3).

A receiver of a gossip round (:meth:`bench.comm.p2p.P2P.exchange`: SGP, FAST) or of AD-PSGD's pairwise averaging
(:mod:`bench.comm.pairwise`, both ends) refuses a message shorter than expected, longer (up to its room: twice the
expected length), or with NaN or inf, with a WireError naming the sender, never an abort and never accepted (before
issue 40 short and NaN vectors were averaged in, and a long header aborted the passive rank); the transport works
on afterwards.
"""

from __future__ import annotations

import json

from support import REPO, horovodrun

SCRIPT = REPO / "tests" / "parallel" / "scripts" / "wire_malformed.py"
EXPECTED = {
    "0": {
        "short vector": "rank 1: short message (tag 51) (fewer than the 8 float32 elements expected)",
        "long vector": "rank 1: message (tag 51) longer than the 8 float32 elements expected",
        "nan vector": "rank 1: message (tag 51) with 1 non-finite value(s)",
        "inf vector": "rank 1: message (tag 51) with 1 non-finite value(s)",
        "short header": "rank 1: short wire test: request header to passive rank 0 (fewer than the 4 int64",
        "long header": "rank 1: wire test: request header to passive rank 0 longer than the 4 int64",
        "short x_active": "rank 1: short wire test: passive rank 0: averaging requested by rank 1: x_active",
        "nan x_active": "rank 1: wire test: passive rank 0: averaging requested by rank 1: x_active with 8 non-finite",
    },
    "1": {"short x_passive": "rank 0: short wire test: x_passive (fewer than the 8 float32 elements expected)"},
}


def test_malformed_gossip_and_pairwise_messages_are_refused_naming_the_sender(tmp_path):
    proc = horovodrun(2, SCRIPT, str(tmp_path), timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert "Exit code: 134" not in output and "Aborted" not in output
    for rank, cases in EXPECTED.items():
        seen = json.loads((tmp_path / f"{rank}.json").read_text())
        for name, message in cases.items():
            assert seen[name].startswith(f"WireError: {message}"), (rank, name, seen[name])
        assert seen["well-formed"] == [1.0 - int(rank)] * 8  # the transport is intact after every refusal
