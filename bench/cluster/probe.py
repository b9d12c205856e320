"""A horovodrun job over the emulated hosts that shows where its ranks really run and talk.

Each rank (``python -m bench.cluster.probe check``) opens the suite's communication layer (:class:`bench.comm.Comm`:
Horovod, then its point-to-point transport, a ``torch.distributed`` gloo group on the cluster's interface), checks
an allreduce, sends a tensor around the ring with ``send``/``recv`` and prints one ``PROBE {json}`` line: its ``HOROVOD_HOSTNAME``,
the address of its interface, its network namespace (``/proc/self/ns/net``), its cpu cgroup, PATH and
PYTHONPATH as they arrived over ssh, the bytes its host's interface sent during the point-to-point
exchange, and the local/remote addresses of every TCP connection the process holds (read from
``/proc/self/fd`` and ``/proc/self/net/tcp``, i.e. in its own namespace: what ``ss -tnp`` would show).

``python -m bench.cluster.probe busbw --sizes ... --iters K`` times Horovod's allreduce itself instead (calling
Horovod directly, like the benchmarks of ``bench/perf/horovod_knobs.py``):
rank 0 prints ``PROBE {"busbw": ...}`` with the median time per allreduce and the bus bandwidth
(algbw × 2(n−1)/n, as nccl-tests define it).

:func:`run_job` is the launcher side: horovodrun in the root namespace with :func:`launch_settings`.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ..layout import REPO_ROOT
from ..system import horovodrun_launch
from .hostfile import horovodrun_args, launch_settings

MARK = "PROBE "


def _tcp_connections() -> list[dict]:
    """This process's IPv4 TCP connections (local, remote, state), from /proc in its own namespace."""
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])

    def addr(hexaddr: str) -> str:
        ip, port = hexaddr.split(":")
        return f"{socket.inet_ntoa(bytes.fromhex(ip)[::-1])}:{int(port, 16)}"

    out = []
    for line in Path("/proc/self/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        if f[9] in inodes:
            out.append({"local": addr(f[1]), "remote": addr(f[2]), "state": {"01": "ESTAB", "0A": "LISTEN"}.get(f[3], f[3])})
    return out


def _tx_bytes(ifname: str) -> int:
    for line in Path("/proc/self/net/dev").read_text().splitlines()[2:]:
        name, data = line.split(":", 1)
        if name.strip() == ifname:
            return int(data.split()[8])
    return -1


def _if_address(ifname: str) -> str:
    import psutil

    return next((a.address for a in psutil.net_if_addrs().get(ifname, []) if a.family == socket.AF_INET), "")


def check(args) -> int:
    """One rank of the probe job: Horovod's allreduce and a ring of point-to-point sends through the suite's own
    communication layer (:class:`bench.comm.Comm`, gloo on the cluster's interface), as a run's ranks use them."""
    import torch

    from ..comm import Comm

    torch.set_num_threads(1)
    ifname = os.environ.get("HOROVOD_GLOO_IFACE", "")
    comm = Comm(network_interface=ifname, p2p_backend="gloo")
    rank, size = comm.rank, comm.size
    my_addr = _if_address(ifname)
    total = comm.allreduce_(torch.full((1000,), float(rank)), name="probe", average=False)
    allreduce_ok = bool(torch.all(total == sum(range(size))))
    p2p = comm.p2p()  # torch.distributed beside Horovod, rendezvous through Horovod on the cluster's interface
    numel = args.p2p_bytes // 4
    send_t, recv_t = torch.full((numel,), float(rank)), torch.empty(numel)
    tx0 = _tx_bytes(ifname)
    t0 = time.perf_counter()
    if size > 1:  # a ring: even ranks send first, odd ranks receive first
        nxt, prv = (rank + 1) % size, (rank - 1) % size
        if rank % 2 == 0:
            p2p.send(send_t, nxt)
            p2p.recv(recv_t, prv)
        else:
            p2p.recv(recv_t, prv)
            p2p.send(send_t, nxt)
    p2p_s = time.perf_counter() - t0
    comm.barrier()  # every send has left its host before the interface counter is read
    tx1 = _tx_bytes(ifname)
    p2p_ok = size == 1 or bool(torch.all(recv_t == float((rank - 1) % size)))
    record = {
        "rank": rank, "size": size, "horovod_hostname": os.environ.get("HOROVOD_HOSTNAME"),
        "hostname": socket.gethostname(), "interface": ifname,
        "address": my_addr, "netns": os.readlink("/proc/self/ns/net"), "pid": os.getpid(),
        "cgroup_cpu": next((line.split(":", 2)[2] for line in Path("/proc/self/cgroup").read_text().splitlines()
                            if ":cpu:" in line or ":cpu," in line), ""),
        "path": os.environ.get("PATH", ""), "pythonpath": os.environ.get("PYTHONPATH", ""),
        "allreduce_ok": allreduce_ok, "p2p_ok": p2p_ok, "p2p_bytes": numel * 4, "p2p_s": p2p_s,
        "tx_bytes_during_p2p": tx1 - tx0, "connections": _tcp_connections(),
    }
    emit(record)
    comm.shutdown()
    return 0


def busbw(args) -> int:
    import horovod.torch as hvd
    import torch

    torch.set_num_threads(1)
    hvd.init()
    n = hvd.size()
    results = []
    for nbytes in args.sizes:
        t = torch.ones(nbytes // 4)
        for _ in range(args.warmup):
            hvd.allreduce_(t, op=hvd.Sum, name=f"bw{nbytes}")
        times = []
        for _ in range(args.iters):
            hvd.allreduce_(torch.zeros(1), op=hvd.Sum, name="sync")  # start together
            t0 = time.perf_counter()
            hvd.allreduce_(t, op=hvd.Sum, name=f"bw{nbytes}")
            times.append(time.perf_counter() - t0)
        # the slowest rank's time is the collective's time
        times = hvd.allreduce(torch.tensor(times, dtype=torch.float64), op=hvd.Max, name=f"t{nbytes}").tolist()
        med = statistics.median(times)
        algbw = nbytes * 8 / med
        results.append({"bytes": nbytes, "size": n, "median_s": med, "times": times, "algbw_bps": algbw,
                        "busbw_bps": algbw * 2 * (n - 1) / n})
    if hvd.rank() == 0:
        emit({"busbw": results})
    hvd.shutdown()
    return 0


def emit(rec: dict) -> None:
    """Print ``rec`` as a rank's ``PROBE`` line, which :func:`read_records` finds in the job's output."""
    print(MARK + json.dumps(rec), flush=True)


def read_record(line: str) -> dict | None:
    """The record a ``PROBE`` line of a job's output carries (any prefix horovodrun puts before it), None for any
    other line."""
    return json.loads(line.split(MARK, 1)[1]) if MARK + "{" in line else None


def read_records(output: str) -> list[dict]:
    """Every record of a job's output (:func:`read_record`), in order."""
    return [r for r in map(read_record, output.splitlines()) if r is not None]


def run_job(st, np: int, mode_args: list[str], timeout: float = 300, server_host: bool = False,
            module: str = "bench.cluster.probe") -> tuple[list[dict], str]:
    """``horovodrun -np N --gloo --hostfile H --network-interface IF -p PORT --ssh-identity-file KEY python -m
    MODULE MODE_ARGS`` from the root namespace (``MODULE``: this one, or a benchmark printing the same ``PROBE``
    lines, :mod:`bench.perf.collectives`); (the PROBE records, the whole output)."""
    settings = launch_settings(st, np, server_host)
    cmd = [*horovodrun_launch(), *horovodrun_args(settings), "--gloo", "--start-timeout", "60", sys.executable, "-m",
           module, *mode_args]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), **settings["env"])
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env, cwd=str(REPO_ROOT), timeout=timeout)
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"horovodrun failed (rc {proc.returncode}): {' '.join(cmd)}\n{output[-4000:]}")
    return read_records(proc.stdout), output


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.cluster.probe")
    sub = ap.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("check")
    c.add_argument("--p2p-bytes", type=int, default=4 << 20)
    b = sub.add_parser("busbw")
    b.add_argument("--sizes", type=lambda v: [int(float(x)) for x in v.split(",")], default=[16 << 20])
    b.add_argument("--iters", type=int, default=5)
    b.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args(argv)
    return check(args) if args.mode == "check" else busbw(args)


if __name__ == "__main__":
    sys.exit(main())
