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

``python -m bench.perf link --delay 0,100us,1ms,5ms,25ms,50ms [--rates 100mbit,1gbit]`` measures the delayed links
instead (``cluster up --delay D``; :mod:`bench.cluster.delay`), one markdown row per rate and delay, on 2 hosts:

- round trip: ``--pings`` one-byte TCP round trips h0 -> h1 -> h0 (``bench.cluster.stream.round_trips``, user space
  to user space), p50 against 2D (target: within 10 % of 2D + 0.1 ms) and the jitter p99 - p50; beside it
  ``ping -U`` (iputils, an independent probe; ``-U``: user-to-user times: without it ping takes the reply's arrival
  stamp from the interface, before the delay line holds it, and shows only the way out);
- bulk TCP: one stream h0 -> h1 of ``--seconds`` after a warm-up of max(1 s, 20 round trips) that is not counted
  (slow start), median of ``--repeats``, against the rate (target: >= 0.90 of it; TCP/IP headers alone take ~4.4 %);
- the delay lines' own release error (p50 and p99 over the row's packets, microseconds after the due time, the worse
  line's p99): how precisely the lines hold, apart from the probes' own scheduling;
- the delay lines' CPU (both hosts': the receiver's holds the data, the sender's the ACKs) per GB received, and all
  the CPU the stream cost (both ends, the delay lines, the machine's irq/softirq time): against the row without a
  delay, what a delay adds.
"""

from __future__ import annotations

import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .. import BenchError
from ..cluster import Spec, check_supported, down, ensure, parse_delay, parse_rate, up
from ..cluster.delay import cpu_seconds, stats
from ..cluster.probe import run_job
from ..cluster.stream import measure, round_trips
from . import PerfParser, fmt_ratio, median

DEFAULT_RATES = "100mbit,1gbit,10gbit,unshaped"
#: allreduce payload per rate: about half a second per allreduce at the configured rate
PAYLOAD = {"100mbit": 8 << 20, "1gbit": 64 << 20, "10gbit": 256 << 20}


def _payload(link: str) -> int:
    if not link:
        return PAYLOAD["10gbit"]
    return PAYLOAD.get(link, max(1 << 20, min(256 << 20, int(parse_rate(link) / 8 * 0.5))))


def p2p(st, seconds: float, repeats: int) -> list[float]:
    a, b = st.hosts[0], st.hosts[1]
    return [measure(a.netns, b.netns, b.address, seconds=seconds)["bps"] for _ in range(repeats)]


def busbw(st, n: int, nbytes: int, iters: int) -> dict:
    records, output = run_job(st, n, ["busbw", "--sizes", str(nbytes), "--iters", str(iters), "--warmup", "1"],
                              timeout=900)
    if not records:
        raise RuntimeError(f"no result from the allreduce job over {n} hosts:\n{output[-3000:]}")
    return records[0]["busbw"][0]


def updown(hosts: int, link: str, repeats: int) -> tuple[list[float], list[float]]:
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
    ap = PerfParser(prog="python -m bench.perf link", description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default=DEFAULT_RATES,
                    help="configured link rates, comma-separated; `unshaped`: no shaper (this machine's ceiling)")
    ap.add_argument("--hosts", default="2,4", help="host counts of the allreduce jobs, comma-separated")
    ap.add_argument("--repeats", type=int, default=3, help="repeats of the stream and of up/down (median reported)")
    ap.add_argument("--seconds", type=float, default=2.0, help="seconds per stream")
    ap.add_argument("--iters", type=int, default=5, help="timed allreduces per job (median reported)")
    ap.add_argument("--delay", default="", help="one-way delays, comma-separated (e.g. 0,100us,1ms,5ms,25ms,50ms): "
                    "measure round trips, bulk TCP and the delay lines' CPU on delayed links instead")
    ap.add_argument("--pings", type=int, default=200, help="round trips per delay (at most 5 s of them)")
    args = ap.parse_args(argv)

    try:
        check_supported()
        delays = [d.strip() for d in args.delay.split(",") if d.strip()]
        for d in delays:
            parse_delay(d)
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if delays:
        return latency(args, delays)
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


def _ping_u(ns: str, addr: str, count: int, interval: float) -> list[float]:
    """Round trips (seconds) of iputils ``ping -U`` (user-to-user times) from namespace ``ns``; [] without ping."""
    try:
        proc = subprocess.run(["ip", "netns", "exec", ns, "ping", "-U", "-n", "-c", str(count), "-i", f"{interval:.3f}",
                               addr], capture_output=True, text=True, timeout=count * (interval + 1) + 30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [float(m) / 1e3 for m in re.findall(r"time=([0-9.]+) ms", proc.stdout)]


def _rx_bytes(ns: str) -> int:
    """Bytes received so far by the host interface of namespace ``ns`` (headers included)."""
    out = subprocess.run(["ip", "-n", ns, "-j", "-s", "link", "show", "dbemu0"], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    return int(json.loads(out)[0]["stats64"]["rx"]["bytes"])


def _cpu(pids: list[int]) -> tuple[float, float]:
    """(CPU seconds of the delay lines ``pids``, of everything the stream costs: this process's reaped children, i.e.
    both stream ends, plus the delay lines, plus the machine's irq and softirq time) so far."""
    lines = sum(cpu_seconds(p) or 0 for p in pids)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    irq = sum(int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[6:8]) / os.sysconf("SC_CLK_TCK")
    return lines, lines + ru.ru_utime + ru.ru_stime + irq


def _pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1] if len(values) > 1 else values[0]


def latency(args, delays: list[str]) -> int:
    """The delayed links' table (module docstring): one markdown row per rate and delay."""
    rates = [r.strip().lower() for r in (args.rates if args.rates != DEFAULT_RATES else "100mbit,1gbit").split(",")]
    print(f"2 emulated hosts, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; round trips: {args.pings} "
          f"TCP pings (at most 5 s) and ping -U; bulk: {args.seconds:g} s after a warm-up, median of {args.repeats}")
    print("| link | delay D | 2D ms | RTT p50 ms | RTT - 2D ms | target | ping -U p50 ms | jitter p99-p50 ms "
          "| line release error p50 / p99 us | TCP Mbit/s | / rate | delay lines CPU s/GB | all CPU s/GB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    try:
        for link in rates:
            for d in delays:
                st = ensure(Spec(hosts=2, link=link, delay=d))
                a, b = st.hosts[0], st.hosts[1]
                two_d = 2 * parse_delay(d)
                count = max(20, min(args.pings, int(5 / max(two_d, 1e-4))))
                rtts = round_trips(a.netns, b.netns, b.address, count=count)
                pings = _ping_u(a.netns, b.address, count, max(0.01, two_d))
                p50, p99 = _pct(rtts, 0.5), _pct(rtts, 0.99)
                ok_rtt = abs(p50 - two_d) <= 0.1 * two_d + 1e-4
                warmup = max(1.0, 20 * two_d)
                pids = [h.delay_pid for h in st.hosts if h.delay_pid]
                rates_bps, cpu, cpu_all, nbytes = [], 0.0, 0.0, 0
                for _ in range(args.repeats):
                    (c0, a0), rx0 = _cpu(pids), _rx_bytes(b.netns)
                    r = measure(a.netns, b.netns, b.address, seconds=args.seconds, warmup=warmup)
                    (c1, a1), rx1 = _cpu(pids), _rx_bytes(b.netns)
                    cpu, cpu_all = cpu + c1 - c0, cpu_all + a1 - a0
                    nbytes += rx1 - rx0  # the whole stream's, warm-up included, like the CPU
                    rates_bps.append(r["bps"])
                bps = median(rates_bps)
                errs = [stats(h.index).get("late_us", {}).get("all", {}) for h in st.hosts if h.delay_pid]
                err = (f"{median([e.get('p50', 0) for e in errs]):.0f} / {max(e.get('p99', 0) for e in errs)}"
                       if errs else "n/a")
                ratio = bps / parse_rate(link) if link else None
                print(f"| {link or 'unshaped'} | {d} | {two_d * 1e3:.1f} | {p50 * 1e3:.3f} | {(p50 - two_d) * 1e3:+.3f} "
                      f"| {'ok' if ok_rtt else 'MISS'} | {median(pings) * 1e3 if pings else float('nan'):.3f} "
                      f"| {(p99 - p50) * 1e3:.3f} | {err} | {bps / 1e6:.1f} | "
                      f"{'n/a' if ratio is None else f'{ratio:.3f}' + ('' if ratio >= 0.9 else ' MISS')} | "
                      f"{f'{cpu / (nbytes / 1e9):.2f}' if pids else 'n/a'} | {cpu_all / (nbytes / 1e9):.2f} |", flush=True)
    finally:
        down()
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    from bench import run_command

    sys.exit(run_command(main))
