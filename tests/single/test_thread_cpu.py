"""bench.timing.ThreadCpu: a rank's CPU per thread group, from the kernel's per-thread scheduler statistics."""

from __future__ import annotations

import threading
import time

import pytest

from bench.timing import ThreadCpu


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_the_training_threads_cpu_is_its_own():
    threads = ThreadCpu()
    before = threads.read()
    if not before:
        pytest.skip("no /proc/self/task/*/schedstat here (not Linux, or schedstat disabled)")
    _burn(0.2)
    got = threads.between(before, threads.read())
    assert got["main"]["threads"] == 1
    assert got["main"]["cpu_s"] == pytest.approx(0.2, abs=0.05)  # the kernel's count and the thread's own clock agree


def test_a_live_threads_cpu_is_counted_under_its_label():
    # the worker burns a fixed 0.2 s of its own CPU between the two reads, however loaded the machine is
    ready, go, done, stop = threading.Event(), threading.Event(), threading.Event(), threading.Event()
    tid = []

    def worker():
        tid.append(threading.get_native_id())
        ready.set()
        go.wait()
        _burn(0.2)
        done.set()
        stop.wait()

    t = threading.Thread(target=worker, daemon=True)
    t.start()
    ready.wait()
    threads = ThreadCpu(horovod_tids=frozenset(tid))
    before = threads.read()
    go.set()
    assert done.wait(timeout=60)  # the main thread sleeps meanwhile: it uses (almost) nothing
    after = threads.read()
    stop.set()
    t.join()
    got = threads.between(before, after)
    assert got["horovod"]["threads"] == 1 and got["horovod"]["cpu_s"] == pytest.approx(0.2, abs=0.05)
    assert got["main"]["cpu_s"] < 0.05
    assert set(got["main"]) == {*ThreadCpu.FIELDS, "threads"}
    assert got["main"]["voluntary"] >= 1  # the sleep gave the CPU up
