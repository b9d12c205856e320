"""``bench probe``'s measurements reduced to a hardware description (``pipelines/hardware/model/<id>.yaml``).

From the job's records (:mod:`bench.probe.rank`):

- **link**: the median over pairs of the receiver's TCP goodput; the rate it stands for is goodput / the TCP goodput
  share of a shaped link this machine measured (``wire_efficiency`` of the calibration, ``bench.perf link``). A pair
  whose sender used at least :data:`CPU_BOUND` of its host's CPU share while it sent was CPU-bound: its goodput is the
  host's, not the link's, and the description says the link is faster than the hosts can fill (no rate).
- **delay**: half the median round trip of the pairs (one way, user space to user space), written as the link's delay
  where it is at least :data:`MIN_DELAY_S` (below it the probe cannot tell a delay line from the hosts' own stack).
- **hosts**: each host's CPU share (one busy thread) and the workload's step: its CPU seconds (median: the step at
  full speed) and its wall seconds (median and mean); the description's compute is the median over hosts of the
  median CPU seconds of a step, its CPU share the median of the shares.
- **collectives**: each measured operation beside :func:`bench.predict.transport.seconds` at the probed rate and delay
  (the model's own terms): the ratio tells how far the model's transport is from this cluster.

Every value carries its source: ``measured by bench probe at <commit>, <UTC>, n=<n>, <repeats>``.
"""

from __future__ import annotations

import statistics

CPU_BOUND = 0.4
"""A sender that used this share of its host's CPU or more while streaming was CPU-bound. Set from the probe-accuracy
scenarios (docs/results/probe/, after their runs: exploratory): streams the link limited used 0.06-0.26 of their
host's share (up to 5 Gbit/s behind a 25 ms delay, whose large segments cost little CPU a byte), streams the hosts
limited (2.8 and 3.8 Gbit/s links, no delay, 0.25-0.38 of a core) 0.46-0.60; the 0.8 first set flagged neither."""
OWN_SHARE = 0.2
"""A host whose CPU share differs from the median by more than this share is written with its own (a straggler)."""
MIN_DELAY_S = 2e-4
"""One-way delays below this are written as none (the probe's resolution on these hosts)."""


def _median(xs):
    return statistics.median(xs) if xs else None


def reduce(records: list[dict], made: dict, np: int, wire_efficiency: float) -> dict:
    """The job's records, kept as the file's ``measured`` lists (their series counted, not kept), then
    :func:`summarise`d."""
    hosts = sorted((r for r in records if r.get("kind") == "host"), key=lambda r: r["rank"])
    pairs = [r for r in records if r.get("kind") == "pair"]
    colls = [r for r in records if r.get("kind") == "collective"]
    if len(hosts) != np or len(pairs) != np * (np - 1) // 2:
        raise RuntimeError(f"the probe job reported {len(hosts)} of {np} hosts and {len(pairs)} of "
                           f"{np * (np - 1) // 2} pairs")
    return summarise(
        [{k: h[k] for k in ("rank", "address", "hostname", "cpu_share", "step_cpu_s_median", "step_s_median",
                            "step_s_mean")} | {"steps": len(h["step_s"])} for h in hosts],
        [{k: p[k] for k in ("src", "dst", "rtt_s_median", "goodput_bps", "counted_s", "sender_cpu_s_per_s")}
         | {"pings": len(p["rtts_s"])} for p in pairs],
        [{k: c[k] for k in ("op", "bytes", "np", "median_s", "iters")} | {"repeats": len(c["times_s"])}
         for c in colls],
        made, np, hosts[0]["workload"], hosts[0]["model_bytes"], wire_efficiency)


def summarise(hosts: list[dict], pairs: list[dict], colls: list[dict], made: dict, np: int, workload: str,
              model_bytes: int, wire_efficiency: float) -> dict:
    """The measured quantities (one number each) from the per-host and per-pair lists a file keeps under
    ``measured`` (so that a file is reduced again by the current rules: :mod:`.validate`'s ``report``)."""
    share = {h["rank"]: h["cpu_share"] for h in hosts}
    pairs = [p | {"cpu_bound": bool(p["sender_cpu_s_per_s"] >= CPU_BOUND * share[p["src"]])} for p in pairs]
    goodput = _median([p["goodput_bps"] for p in pairs])
    cpu_bound = sum(p["cpu_bound"] for p in pairs) > len(pairs) / 2
    one_way = _median([p["rtt_s_median"] for p in pairs]) / 2
    return {
        "made": made,
        "np": np,
        "workload": workload,
        "goodput_bps": goodput,
        "rate_bps": None if cpu_bound else goodput / wire_efficiency,
        "cpu_bound": cpu_bound,
        "one_way_s": one_way,
        "delay_s": one_way if one_way >= MIN_DELAY_S else 0.0,
        "cpu_share": _median([h["cpu_share"] for h in hosts]),
        "step_s": _median([h["step_cpu_s_median"] for h in hosts]),
        "step_s_median": _median([h["step_s_median"] for h in hosts]),
        "step_s_mean": _median([h["step_s_mean"] for h in hosts]),
        "model_bytes": model_bytes,
        "source": f"measured by bench probe at {str(made['commit'])[:12]}, {made['date']}, n={np}",
        "hosts": hosts,
        "pairs": pairs,
        "collectives": colls,
    }


def rate_text(bps: float) -> str:
    """A rate as the launch profiles write it (``98mbit``, ``1.2gbit``)."""
    return f"{bps / 1e9:.3g}gbit" if bps >= 1e9 else f"{bps / 1e6:.3g}mbit" if bps >= 1e6 else f"{bps / 1e3:.3g}kbit"


def delay_text(s: float) -> str:
    return f"{s * 1e3:.3g}ms" if s > 0 else ""


def with_model(m: dict, transport_k: dict | None) -> dict:
    """The collectives beside the model's transport forecast at the probed rate and delay (``transport_k``: the
    calibration's ``transport`` constants; None: no forecast)."""
    from ..predict import transport

    for c in m["collectives"]:
        if transport_k is None:
            c["model_s"] = c["model_error"] = None
            continue
        c["model_s"] = transport.seconds(c["op"], c["bytes"], c["np"], m["rate_bps"] or 0.0, m["delay_s"], transport_k)
        c["model_error"] = c["model_s"] / c["median_s"] - 1
    return m


def description(m: dict, hardware: str, launch_profile: str, profile: str, emulated: bool,
                cluster_set: dict | None = None) -> dict:
    """The hardware file: a described hardware (a link level, host CPU, compute of the workload) that
    ``bench predict --hardware`` reads; on an emulated cluster also ``probed``: the launch settings (link, delay,
    CPU share) the model's emulated-cluster terms take in place of the profile's, and the compute step."""
    src = m["source"]
    rate_src = (f"{src}: median TCP goodput over {len(m['pairs'])} pairs / the calibration's wire efficiency"
                if m["rate_bps"] else f"{src}: the streams were CPU-bound (the hosts fill no faster): no rate")
    out = {
        "description": f"{hardware} as bench probe measured it ({m['np']} hosts, {m['made']['date']})",
        "launch_profile": launch_profile,
        "profile": profile,
        "levels": [{
            "name": "probed TCP",
            "busbw_GBps": m["goodput_bps"] / 8e9,
            "latency_us": m["one_way_s"] * 1e6,
            "source": f"{src}: median goodput over the pairs; latency: half the median one-byte round trip",
        }],
        "host_cores": m["cpu_share"],
        "host_cores_source": f"{src}: median over hosts of the CPU a busy thread got in one second",
        "op_overhead_s": 0.0,
        "compute": {m["workload"]: {"step_s": m["step_s"], "source": f"{src}: median over hosts of a step's median CPU "
                                    f"seconds ({m['hosts'][0]['steps']} steps a host)"}},
        "measured": {k: m[k] for k in ("made", "np", "workload", "goodput_bps", "rate_bps", "cpu_bound", "one_way_s",
                                       "delay_s", "cpu_share", "step_s", "step_s_median", "step_s_mean", "model_bytes", "hosts", "pairs",
                                       "collectives")},
    }
    if emulated:
        out["probed"] = {
            "link": rate_text(m["rate_bps"]) if m["rate_bps"] else "",
            "link_source": rate_src,
            "link_delay": delay_text(m["delay_s"]),
            "link_delay_source": f"{src}: half the median round trip (none below {MIN_DELAY_S * 1e3:g} ms)",
            "cpu_per_host": round(m["cpu_share"], 4),
            "cpu_per_host_source": f"{src}: median over hosts of the CPU a busy thread got in one second",
            "emulated_cpu": {h["rank"]: round(h["cpu_share"], 4) for h in m["hosts"]
                             if abs(h["cpu_share"] / m["cpu_share"] - 1) > OWN_SHARE},
            "emulated_cpu_source": f"{src}: the hosts whose share differs from the median by more than "
                                   f"{OWN_SHARE:.0%} (a straggler), each its own",
            "compute_s": m["step_s"],
            "compute_source": f"{src}: median over hosts of the workload's median CPU seconds a step",
            # the settings the probed emulated cluster was brought up with: `bench advise --confirm` brings the same
            # cluster up to run on; no forecast reads them (they are the truth the probe estimates)
            "cluster_set": dict(cluster_set or {}),
        }
    return out
