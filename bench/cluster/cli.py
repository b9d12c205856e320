"""``python -m bench cluster up|down|status`` (also ``python -m bench.cluster ...``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .. import BenchError, OneLineParser, run_command
from . import delay, net, slurm
from .cgroups import share_of
from .lifecycle import down, leftovers, problems, start_slurm, state, up
from .spec import Spec


def _cpu_arg(text: str) -> tuple[int, float]:
    try:
        host, share = text.split("=", 1)
        return int(host), float(share)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HOST=SHARE (e.g. 1=0.5), got {text!r}")


def _print_state(st) -> None:
    print(f"emulated cluster: {len(st.hosts)} host(s), {st.slots} slot(s) each, link {st.link or 'unshaped'}, "
          f"delay {st.delay or 0} one way, "
          f"interface {st.interface}, launcher {st.bridge_address} (bridge {st.bridge}), ssh port {st.ssh_port}")
    for h in st.hosts:
        share = share_of(h.cgroup)
        qd = net.qdiscs(h.index)
        rate = " / ".join(sorted({q.split(" rate ")[1].split()[0] for q in qd.values() if " rate " in q})) or "unshaped"
        print(f"  host {h.index}: {h.address:<13} netns {h.netns:<10} veth {h.veth}<->{st.interface}  link {rate}  "
              f"cpu {'unlimited' if share is None else f'{share:g} core'}  sshd pid {h.sshd_pid}")
    print(f"  ssh identity {st.ssh_identity_file}; launcher PATH needs {st.ssh_bin_dir} first")
    for line in delay.status_lines(st) + slurm.status_lines():
        print(line)


def cmd_cluster(args) -> int:
    if args.action == "up":
        t0 = time.perf_counter()
        st = up(Spec(hosts=args.hosts, slots=args.slots, link=args.link, cpu=dict(args.cpu or []), delay=args.delay))
        if args.slurm:
            start_slurm()
        _print_state(st)
        print(f"up in {time.perf_counter() - t0:.2f} s")
    elif args.action == "down":
        t0 = time.perf_counter()
        removed = down()
        print(f"removed in {time.perf_counter() - t0:.2f} s" if removed else "nothing to remove")
    else:
        if os.geteuid() != 0:
            raise BenchError("the emulated cluster needs root (network namespaces, veth, tc need CAP_NET_ADMIN)")
        st = state()
        if args.json:
            print(json.dumps({"state": json.loads(st.to_json()) if st else None, "slurm": slurm.state() if st else None,
                              "leftovers": leftovers()}, indent=2))
            return 0
        if st:
            _print_state(st)
        elif problems():
            print(f"emulated cluster BROKEN: {'; '.join(problems())}; the next --hardware emu* run or `up` rebuilds it, "
                  f"`down` removes it")
        else:
            left = {k: v for k, v in leftovers().items() if v}
            print("no emulated cluster" + (f"; leftovers (removed by the next up/down): {left}" if left else ""))
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``cluster`` subcommand to ``python -m bench``'s subparsers."""
    c = subparsers.add_parser("cluster", help="emulated cluster: one network namespace per host, shaped links, sshd")
    c.add_argument("action", choices=["up", "down", "status"])
    c.add_argument("--hosts", type=int, default=2, help="number of emulated hosts (up; default 2)")
    c.add_argument("--slots", type=int, default=1, help="processes per host in the hostfiles (up; default 1)")
    c.add_argument("--link", default="", help="each host's link rate in both directions: 100mbit, 1gbit, 10gbit "
                   "(up; default unshaped)")
    c.add_argument("--delay", default="", help="one-way delay between any two hosts: 500us, 5ms, 50ms (up; default "
                   "0); each host's ingress is held that long, so a round trip between hosts takes 2x it")
    c.add_argument("--cpu", type=_cpu_arg, action="append", metavar="HOST=SHARE",
                   help="limit host HOST to SHARE of one core (up; repeatable), e.g. --cpu 1=0.5")
    c.add_argument("--slurm", action="store_true", help="also run Slurm on the hosts (up): munged and slurmctld on the "
                   "launcher, a slurmd per host; pipelines/slurm/run-blocking.sh then submits to it")
    c.add_argument("--json", action="store_true", help="status as JSON")
    c.set_defaults(func=cmd_cluster)
    return c


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="python -m bench")
    sub = ap.add_subparsers(dest="command", required=True)
    add_parser(sub)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != ["cluster"]:
        argv = ["cluster", *argv]
    args = ap.parse_args(argv)
    return run_command(args.func, args)



