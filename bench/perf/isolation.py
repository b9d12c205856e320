"""Isolated emulated hosts: does a host compute as fast with every other host busy as alone?

``python -m bench.perf isolation [--hosts 4,8] [--cpu-per-host S] [--budget 1.8] [--trials 3] [--seconds 3]
[--profile comm-heavy] [--cpu-idle poll] [--run-np 0]`` (root)

For each host count n (one emulated cluster, reshaped in place), every host gets the share
min(S, budget / n) of a core (S: the ``emu`` hardware profile's ``cpu_per_host`` unless given; the
budget, the cores all hosts may take together, leaves the rest of the machine to the launcher: the
host counts that do not fit S get the share that fits). On each host one process is started over ssh,
exactly as ranks are (its sshd runs in the host's network namespace and cgroup, so the process and its
threads are in both): it builds the profile's model (one torch thread), takes real training steps
(forward, backward, optimizer step on the profile's data) for a warm-up, then follows a schedule of
windows of ``--seconds`` on the common clock: in each trial, each host alone (the others idle), then
every host busy at once. A window's time per step is its elapsed time over the steps it completed. Idle CPUs poll during the
measurement as in the ``emu`` profile's runs (``cpu_idle``, :mod:`bench.cpu_idle`; ``--cpu-idle default`` measures
with the kernel's idle states).

It prints per host the median time per step alone and busy and their ratio R = rate busy / rate
alone (1: the others' load does not touch it), and, last, ``isolation: worst ratio R``: the host ratio
furthest from 1 over all host counts (goal 0.95-1.05). The spread of a host's alone rate between
trials is printed beside it (the noise the ratio must be read against).

``--run-np N`` also runs ``sync`` with N workers on the ``emu`` profile (``--profile``'s model, a few
dozen steps), inside the shares and then on unlimited hosts, and reports what the ranks' own threads
(Horovod's background thread, gloo's) do inside a share: per host, the CPU its processes used while
they ran (sampled from the host's cgroup), the CFS periods in which the host was throttled
(``cpu.stat``), and the run's compute / communication time per step against the unlimited run's.

A cluster up when this starts is reshaped in place and given back its link and shares at the end (hosts added
stay); without one, the cluster made here is taken down.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

from .. import BenchError, cpu_idle
from ..cluster import Spec, check_supported, down, ensure, in_use, state
from ..data import load_dataset
from ..layout import REPO_ROOT
from ..models import build_model, make_optimizer
from ..resolve import load_hardware, resolve
from ..results import load_run
from . import PerfParser, median

MARK = "ISOLATION "
READY = "READY"


# ------------------------------------------------------------------ the load, inside a host


def load(args) -> int:
    """One host's process: warm up, say READY, read the common start time, then run the windows it is active in;
    print one ``ISOLATION {json}`` line with (window, steps, elapsed) per active window."""
    torch.set_num_threads(1)
    train = resolve("sync", profile=args.profile).train
    ds = load_dataset(train)
    model = build_model(train, ds.input_shape, ds.num_classes)
    opt = make_optimizer(train, model.parameters())
    batches = [(ds.x_train[i:i + train.batch_size], ds.y_train[i:i + train.batch_size])
               for i in range(0, 8 * train.batch_size, train.batch_size)]
    k = 0

    def step() -> None:
        nonlocal k
        x, y = batches[k % len(batches)]
        k += 1
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(args.warmup_steps):
        step()
    print(READY, flush=True)
    t0 = float(sys.stdin.readline())
    schedule = json.loads(args.schedule)  # [[start, end, active], ...] seconds after t0
    out = []
    for w, (start, end, active) in enumerate(schedule):
        if not active:
            continue
        while time.time() < t0 + start:
            time.sleep(min(0.05, max(0.0, t0 + start - time.time())))
        steps, first, last = 0, time.perf_counter(), None
        deadline = time.perf_counter() + (t0 + end - time.time())
        while time.perf_counter() < deadline:
            step()
            steps += 1
            last = time.perf_counter()
        out.append([w, steps, (last - first) if last else math.nan])
    cgroup = next((line.split(":", 2)[2] for line in Path("/proc/self/cgroup").read_text().splitlines()
                   if ":cpu:" in line or ":cpu," in line), "")
    print(MARK + json.dumps({"windows": out, "pid": os.getpid(), "cgroup": cgroup}), flush=True)
    return 0


# ------------------------------------------------------------------ the launcher side


def schedule(n: int, trials: int, seconds: float, gap: float = 0.25) -> tuple[list[tuple], list[list]]:
    """Windows ``(trial, kind, host or None)`` in order (each trial: every host alone, then all busy; odd trials
    busy first, so drift hits both alike) and each host's ``[start, end, active]`` list over them."""
    windows = []
    for trial in range(trials):
        alone = [(trial, "alone", i) for i in range(n)]
        busy = [(trial, "busy", None)]
        windows += (alone + busy) if trial % 2 == 0 else (busy + alone)
    per_host = [[] for _ in range(n)]
    for w, (_, kind, host) in enumerate(windows):
        start = w * (seconds + gap)
        for i in range(n):
            per_host[i].append([start, start + seconds, kind == "busy" or host == i])
    return windows, per_host


def _remote(st, host, argv: list[str]) -> list[str]:
    """``ssh HOST <command>`` through the suite's ssh wrapper: the command runs in the host's namespace and cgroup."""
    inner = " ".join([f"cd {REPO_ROOT} &&", f"PYTHONPATH={REPO_ROOT}", "OMP_NUM_THREADS=1", "exec", sys.executable,
                      "-m", "bench.perf.isolation", *argv])
    return [str(Path(st.ssh_bin_dir) / "ssh"), host.address, inner]


def measure(st, n: int, trials: int, seconds: float, profile: str, warmup_steps: int = 3,
            start_timeout: float = 300) -> dict:
    """Run the schedule on hosts 0..n-1 of the live cluster ``st``; per host, the time per step of each window."""
    windows, per_host = schedule(n, trials, seconds)
    procs = []
    try:
        for i in range(n):
            argv = ["load", "--profile", profile, "--warmup-steps", str(warmup_steps),
                    "--schedule", "'" + json.dumps(per_host[i]) + "'"]
            procs.append(subprocess.Popen(_remote(st, st.hosts[i], argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        deadline = time.time() + start_timeout
        for i, p in enumerate(procs):
            line = ""
            while line.strip() != READY:
                line = p.stdout.readline()
                if not line or time.time() > deadline:
                    why = "" if line else p.stderr.read()[-2000:]
                    raise RuntimeError(f"the load on host {i} did not start: {why}")
        t0 = time.time() + 0.5
        for p in procs:
            p.stdin.write(f"{t0!r}\n")
            p.stdin.flush()
        total = per_host[0][-1][1] + 60
        results = []
        for i, p in enumerate(procs):
            out, err = p.communicate(timeout=total)
            rec = next((json.loads(line[len(MARK):]) for line in out.splitlines() if line.startswith(MARK)), None)
            if rec is None:
                raise RuntimeError(f"no result from host {i} (rc {p.returncode}): {err[-2000:]}")
            results.append(rec)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    per_step = {i: {"alone": [], "busy": []} for i in range(n)}
    for i, rec in enumerate(results):
        for w, steps, elapsed in rec["windows"]:
            _, kind, _ = windows[w]
            per_step[i][kind].append(elapsed / steps if steps > 1 else math.nan)
    return {"per_step": per_step, "cgroups": [r["cgroup"] for r in results]}


def _spread(values: list[float]) -> float:
    """(max - min) / median of a host's rates over the trials."""
    rates = [1 / v for v in values if v and math.isfinite(v)]
    return (max(rates) - min(rates)) / median(rates) if len(rates) > 1 else math.nan


def _pct(x: float) -> str:
    return f"{x:.1%}" if math.isfinite(x) else "-"


def ratios(per_step: dict) -> dict[int, float]:
    """Host -> rate busy / rate alone (medians over the trials)."""
    out = {}
    for i, d in per_step.items():
        alone, busy = median(d["alone"]), median(d["busy"])
        out[i] = alone / busy if busy and math.isfinite(busy) and math.isfinite(alone) else math.nan
    return out


def worst(values) -> float:
    """The ratio furthest from 1 (in log scale); nan if any is not finite."""
    values = list(values)
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        return math.nan
    return max(values, key=lambda v: abs(math.log(v)))


# ------------------------------------------------------------------ what the ranks' threads do inside a share


class _CgroupSampler:
    """CPU seconds used by the processes of each host's cgroup, sampled (the v1 ``cpu`` controller has no usage
    counter here): per pid, the largest user + system time seen, summed per host."""

    def __init__(self, groups: list[str]):
        self.groups, self.seen = groups, [{} for _ in groups]
        self.active = [[math.inf, -math.inf] for _ in groups]  # first and last time a process of the group was seen

    def sample(self) -> None:
        import psutil

        for k, g in enumerate(self.groups):
            try:
                pids = [int(x) for x in (Path(g) / "cgroup.procs").read_text().split()]
            except OSError:
                continue
            for pid in pids:
                try:
                    p = psutil.Process(pid)
                    if p.name() == "sshd":
                        continue  # the host's daemon and sessions: not the job's work
                    c = p.cpu_times()  # the process's own threads; its children are sampled themselves
                except psutil.Error:
                    continue
                self.seen[k][pid] = max(self.seen[k].get(pid, 0.0), c.user + c.system)
                now = time.time()
                self.active[k] = [min(self.active[k][0], now), max(self.active[k][1], now)]

    def used(self) -> list[tuple[float, float]]:
        """Per host: (CPU seconds, seconds between the first and the last sample that found its processes)."""
        return [(sum(d.values()), max(b - a, 0.0)) for d, (a, b) in zip(self.seen, self.active)]


def _stat(group: str) -> dict[str, int]:
    try:
        return {k: int(v) for k, v in (line.split() for line in (Path(group) / "cpu.stat").read_text().splitlines())}
    except OSError:
        return {}


def rank_threads(np_: int, profile: str, steps: int, cpu_per_host: float, out_dir: Path) -> list[str]:
    """Run ``sync`` with ``np_`` workers on the ``emu`` profile and describe each host's CPU use and throttling."""
    ensure(Spec(hosts=np_, cpu={i: cpu_per_host for i in range(np_)} if cpu_per_host else {}))  # reshaped in place
    out = out_dir / f"sync-np{np_}-cpu{cpu_per_host:g}"
    cmd = [sys.executable, "-m", "bench", "run", "sync", "--np", str(np_), "--hardware", "emu", "--profile", profile,
           "--out", str(out), "--quiet", "--set", f"max_steps={steps}", "--set", "eval_every=0",
           "--set", "save_model=false", "--set", "warmup_steps=3", "--set", f"cpu_per_host={cpu_per_host}"]
    env = dict(os.environ, BENCH_PROGRESS="0")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    st = None
    while st is None and proc.poll() is None:
        time.sleep(0.2)
        st = state()
    groups = [h.cgroup for h in st.hosts[:np_]] if st else []
    sampler, before = _CgroupSampler(groups), [_stat(g) for g in groups]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            sampler.sample()
            time.sleep(0.25)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    output, _ = proc.communicate(timeout=1800)
    done.set()
    th.join()
    after = [_stat(g) for g in groups]
    if proc.returncode != 0:
        return [f"sync np={np_} on emu failed (rc {proc.returncode}): {output.strip().splitlines()[-1:]}"]
    run = load_run(out)
    s = run.steps[~run.steps["warmup"]]
    lines = [f"sync np={np_} on emu ({profile}, {steps} steps, cpu_per_host {cpu_per_host:g}): throughput "
             f"{run.summary['throughput']:.1f} samples/s; per step compute {s['compute_s'].median() * 1e3:.1f} ms, "
             f"comm {s['comm_s'].median() * 1e3:.1f} ms, wait {s['wait_s'].median() * 1e3:.1f} ms (medians)"]
    for k, (b, a, (used, span)) in enumerate(zip(before, after, sampler.used())):
        periods = a.get("nr_periods", 0) - b.get("nr_periods", 0)
        throttled = a.get("nr_throttled", 0) - b.get("nr_throttled", 0)
        ttime = (a.get("throttled_time", 0) - b.get("throttled_time", 0)) / 1e9
        limit = f"{cpu_per_host:g}" if cpu_per_host else "unlimited"
        cores = used / span if span else math.nan
        lines.append(f"  host {k}: CPU {used:.1f} s over the {span:.1f} s its processes ran ({cores:.2f} "
                     f"cores, share {limit}); throttled in {throttled}/{periods} periods"
                     + (f" ({throttled / periods:.0%}), {ttime:.1f} s throttled" if periods else ""))
    return lines


# ------------------------------------------------------------------ the benchmark


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["load"]:
        lp = PerfParser(prog="python -m bench.perf.isolation load")
        lp.add_argument("--profile", required=True)
        lp.add_argument("--warmup-steps", type=int, default=3)
        lp.add_argument("--schedule", required=True)
        return load(lp.parse_args(argv[1:]))
    ap = PerfParser(prog="python -m bench.perf isolation", description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", default="4,8", help="host counts, comma-separated (default 4,8)")
    ap.add_argument("--cpu-per-host", type=float, default=None,
                    help="cores per host (default: the emu hardware profile's cpu_per_host)")
    ap.add_argument("--budget", type=float, default=None,
                    help="cores all hosts may take together (default: this machine's cores - 0.2 for the launcher); "
                         "a host count that does not fit --cpu-per-host gets budget / hosts each")
    ap.add_argument("--trials", type=int, default=3, help="trials (each: every host alone, then all busy)")
    ap.add_argument("--seconds", type=float, default=3.0, help="seconds per window (default 3: 30 CFS periods)")
    ap.add_argument("--profile", default="comm-heavy", help="training profile whose model and batch the hosts step "
                    "(default comm-heavy, the regimes study's)")
    ap.add_argument("--cpu-idle", default=None, choices=("default", "poll"),
                    help="idle CPUs during the measurement (default: the emu hardware profile's cpu_idle; poll: hold "
                         "/dev/cpu_dma_latency at 0 us, bench.cpu_idle)")
    ap.add_argument("--run-np", type=int, default=0, help="also run sync with this many workers on emu and report "
                    "each host's CPU use and throttling (0: no)")
    ap.add_argument("--run-steps", type=int, default=40, help="steps of that run")
    args = ap.parse_args(argv)

    try:
        check_supported()
        counts = [int(h) for h in args.hosts.split(",") if h.strip()]
        if not counts or min(counts) < 1:
            raise BenchError(f"--hosts must list host counts >= 1, got {args.hosts!r}")
        if args.trials < 1 or args.seconds <= 0:
            raise BenchError(f"--trials must be >= 1 and --seconds > 0, got {args.trials} and {args.seconds}")
        share = args.cpu_per_host
        if share is None:
            share = float(load_hardware("emu").get("cpu_per_host") or 0)
        idle = args.cpu_idle or load_hardware("emu").get("cpu_idle", "default")
        cpu_idle.check(idle)
        budget = args.budget if args.budget is not None else (os.cpu_count() or 1) - 0.2
        if share <= 0 or budget <= 0:
            raise BenchError(f"--cpu-per-host and --budget must be > 0 cores, got {share} and {budget}")
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    before = state()
    keep = (before.spec() if before else None)
    load_avg = os.getloadavg()
    print(f"isolation: {os.cpu_count()} cores, load average {load_avg[0]:.2f} {load_avg[1]:.2f} {load_avg[2]:.2f} at "
          f"start; profile {args.profile}, {args.trials} trial(s) x (each host alone, all busy), {args.seconds:g} s "
          f"windows; budget {budget:g} cores for the hosts; idle CPUs: {idle}")
    print(f"{'hosts':>5} {'share':>6} {'host':>4} {'alone ms/step':>13} {'busy ms/step':>12} {'busy/alone rate':>15} "
          f"{'alone spread':>12}")
    all_ratios = []
    stack = contextlib.ExitStack()
    try:
        stack.enter_context(cpu_idle.held(idle))
        for n in counts:
            each = min(share, budget / n)
            with in_use(f"bench.perf isolation ({n} hosts)"):
                st = ensure(Spec(hosts=n, cpu={i: each for i in range(n)}))
                r = measure(st, n, args.trials, args.seconds, args.profile)
            rs = ratios(r["per_step"])
            for i in range(n):
                d = r["per_step"][i]
                print(f"{n:>5} {each:>6.3g} {i:>4} {median(d['alone']) * 1e3:>13.1f} {median(d['busy']) * 1e3:>12.1f} "
                      f"{rs[i]:>15.3f} {_pct(_spread(d['alone'])):>12}", flush=True)
            all_ratios += list(rs.values())
            print(f"{n:>5} hosts: the loads ran in cpu cgroups {', '.join(r['cgroups'])}", flush=True)
            print(f"{n:>5} hosts at {each:.3g} core: worst ratio {worst(rs.values()):.3f}, mean "
                  f"{statistics.fmean(rs.values()):.3f} (load average now {os.getloadavg()[0]:.2f}: processes outside "
                  f"the cluster compete for the cores too)", flush=True)
        if args.run_np:
            import tempfile

            with tempfile.TemporaryDirectory(prefix="isolation-") as tmp:
                for each in (min(share, budget / (args.run_np + 1)), 0.0):  # then unlimited hosts, for comparison
                    for line in rank_threads(args.run_np, args.profile, args.run_steps, each, Path(tmp)):
                        print(line, flush=True)
    except (BenchError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        stack.close()
        if keep is not None:
            ensure(keep)
        else:
            down()
    print(f"isolation: worst ratio {worst(all_ratios):.3f}")
    return 0


if __name__ == "__main__":
    from bench import run_command

    sys.exit(run_command(main))
