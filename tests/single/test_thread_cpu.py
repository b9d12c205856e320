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
    stop = threading.Event()
    ready = threading.Event()
    tid = []

    def worker():
        tid.append(threading.get_native_id())
        ready.set()
        while not stop.is_set():
            _burn(0.01)

    t = threading.Thread(target=worker, daemon=True)
    t.start()
    ready.wait()
    threads = ThreadCpu(horovod_tids=frozenset(tid))
    before = threads.read()
    time.sleep(0.3)  # the main thread sleeps: it uses (almost) nothing
    after = threads.read()
    stop.set()
    t.join()
    got = threads.between(before, after)
    assert got["horovod"]["threads"] == 1 and got["horovod"]["cpu_s"] > 0.1
    assert got["main"]["cpu_s"] < 0.05
    assert set(got["main"]) == {*ThreadCpu.FIELDS, "threads"}
    assert got["main"]["voluntary"] >= 1  # the sleep gave the CPU up
