"""Run under horovodrun (np=3 by tests/parallel/test_horovod_settings.py): Comm's broadcast and allgather with the
sleeping wait (``wait_sleep_us``) give what Horovod's own give, and wait by polling; rank 0 writes JSON to argv[1]."""

from __future__ import annotations

import json
import sys

import torch

from bench.comm import Comm

comm = Comm(wait_sleep_us=250)
waits = []
wait = comm.wait_sleeping
comm.wait_sleeping = lambda handles: (waits.append(len(handles)), wait(handles))[1]
r = comm.rank
state = {"b": torch.full((3,), float(r)), "a": torch.arange(5, dtype=torch.float64) + 10 * r}
comm.broadcast_parameters(state, root=1)
gathered = comm.allgather(torch.full((r + 1,), float(r)))
rows = [{"a": state["a"].tolist(), "b": state["b"].tolist(), "gathered": gathered.tolist(), "waits": waits}]
rows = comm.allgather_object(rows[0], name="check.rows")
if r == 0:
    with open(sys.argv[1], "w") as f:
        json.dump(rows, f)
comm.shutdown()
