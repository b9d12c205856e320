"""Emulated-cluster links: do the shaped links deliver the configured rate, and what does Horovod get from them?

``python -m bench.perf link [--rates 100mbit,1gbit,10gbit] [--hosts 2,4] [--repeats 3] [--seconds 2]``

For each configured link rate (one emulated cluster of max(--hosts) hosts, reshaped in place
between rates), in the same run:

1. point-to-point: one TCP stream (Python sockets, ``bench.cluster.stream``) from host 0 to host 1,
   goodput seen by the receiver; median of ``--repeats``, and its ratio to the configured rate.
   TCP/IP headers take ~4.4% of a 1500-byte frame, so a perfect link shows ~0.957.
2. Horovod allreduce over n hosts (a real ``horovodrun`` job launched over ssh, one rank per host):
   bus bandwidth busbw = algbw × 2(n−1)/n as nccl-tests define it (algbw = bytes / time of the
   slowest rank), median of ``--iters`` allreduces, against the configured rate and against the
   point-to-point figure.
3. Seconds to bring the cluster (max(--hosts) hosts) up and down, median of ``--repeats``.

The target is within ±15% of the configured rate at 100 Mbit and 1 Gbit. At 10 Gbit the veth
pairs, the shapers and the ranks share this machine's cores: the stream and the reduction of the
allreduce are CPU-bound, so the figure reports what the machine reaches, not the link; the
``unshaped`` row (no shaper at all) is that ceiling, measured in the same run. Any cluster
that is up when this starts is replaced, and nothing is left up at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from . import fmt_ratio, median

#: allreduce payload per rate: about half a second per allreduce at the configured rate
PAYLOAD = {"100mbit": 8 << 20, "1gbit": 64 << 20, "10gbit": 256 << 20}


def _payload(link: str) -> int:
    from ..cluster import parse_rate

    if not link:
        return PAYLOAD["10gbit"]
    return PAYLOAD.get(link, max(1 << 20, min(256 << 20, int(parse_rate(link) / 8 * 0.5))))


def p2p(st, seconds: float, repeats: int) -> list[float]:
    from ..cluster.stream import measure

    a, b = st.hosts[0], st.hosts[1]
    return [measure(a.netns, b.netns, b.address, seconds=seconds)["bps"] for _ in range(repeats)]


def busbw(st, n: int, nbytes: int, iters: int) -> dict:
    from ..cluster.probe import run_job

    records, output = run_job(st, n, ["busbw", "--sizes", str(nbytes), "--iters", str(iters), "--warmup", "1"],
                              timeout=900)
    if not records:
        raise RuntimeError(f"no result from the allreduce job over {n} hosts:\n{output[-3000:]}")
    return records[0]["busbw"][0]


def updown(hosts: int, link: str, repeats: int) -> tuple[list[float], list[float]]:
    from ..cluster import Spec, down, up

    ups, downs = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        up(Spec(hosts=hosts, link=link))
        ups.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        down()
        downs.append(time.perf_counter() - t0)
    return ups, downs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.perf link", description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="100mbit,1gbit,10gbit,unshaped",
                    help="configured link rates, comma-separated; `unshaped`: no shaper (this machine's ceiling)")
    ap.add_argument("--hosts", default="2,4", help="host counts of the allreduce jobs, comma-separated")
    ap.add_argument("--repeats", type=int, default=3, help="repeats of the stream and of up/down (median reported)")
    ap.add_argument("--seconds", type=float, default=2.0, help="seconds per stream")
    ap.add_argument("--iters", type=int, default=5, help="timed allreduces per job (median reported)")
    args = ap.parse_args(argv)

    from .. import BenchError
    from ..cluster import Spec, check_supported, down, ensure, parse_rate

    try:
        check_supported()
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rates = [("" if r.strip().lower() == "unshaped" else r.strip().lower()) for r in args.rates.split(",") if r.strip()]
    host_counts = [int(h) for h in args.hosts.split(",")]
    n_hosts = max(host_counts + [2])
    print(f"emulated cluster: {n_hosts} hosts (network namespaces on one bridge, tbf both directions), "
          f"{os.cpu_count()} cores; stream {args.seconds:g} s x {args.repeats}, allreduce median of {args.iters}")
    print(f"{'link':>8} {'measurement':<28} {'median':>14} {'/ configured':>12} {'/ p2p':>7}")
    try:
        for link in rates:
            configured = parse_rate(link)
            st = ensure(Spec(hosts=n_hosts, link=link))
            stream = median(p2p(st, args.seconds, args.repeats))
            name = link or "unshaped"
            print(f"{name:>8} {'p2p TCP stream h0->h1':<28} {stream / 1e6:>9.1f} Mb/s {fmt_ratio(stream, configured):>12} "
                  f"{'':>7}", flush=True)
            nbytes = _payload(link)
            for n in host_counts:
                r = busbw(st, n, nbytes, args.iters)
                label = f"allreduce busbw n={n} {nbytes >> 20} MiB"
                print(f"{name:>8} {label:<28} {r['busbw_bps'] / 1e6:>9.1f} Mb/s "
                      f"{fmt_ratio(r['busbw_bps'], configured):>12} {fmt_ratio(r['busbw_bps'], stream):>7}"
                      f"   (algbw {r['algbw_bps'] / 1e6:.1f} Mb/s, {r['median_s'] * 1e3:.0f} ms per allreduce)", flush=True)
        down()
        ups, downs = updown(n_hosts, rates[0] if rates else "", args.repeats)
        print(f"cluster of {n_hosts} hosts: up {median(ups):.2f} s, down {median(downs):.2f} s "
              f"(median of {args.repeats}; up includes keys, {n_hosts} sshd started and answering)")
    finally:
        down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
