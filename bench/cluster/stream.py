"""Point-to-point throughput and round trips between two emulated hosts: plain Python TCP sockets (no iperf).

``python -m bench.cluster.stream recv --bind ADDR [--port P] [--warmup W]`` accepts one connection, reads it to
the end and prints one JSON line (bytes, seconds from the first to the last byte, bits/s; with ``--warmup``, only
the bytes after the first W seconds count: TCP's steady state, not its slow start);
``python -m bench.cluster.stream send --to ADDR [--port P] --seconds T`` writes 1 MiB chunks for T
seconds. :func:`measure` runs the pair with ``ip netns exec`` in two host namespaces and returns
what the receiver saw, so the figure is the goodput that crossed both hosts' shaped links.

``echo --bind ADDR`` answers every byte it reads with one byte; ``ping --to ADDR --count N`` sends one byte at a
time over one TCP connection (TCP_NODELAY) and times each answer (``time.perf_counter``, user space to user space).
:func:`round_trips` runs the pair in two host namespaces and returns the N round trips in seconds.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from contextlib import contextmanager

PORT = 5201
CHUNK = 1 << 20


def recv(bind: str, port: int, timeout: float = 60, warmup: float = 0.0) -> dict:
    with socket.create_server((bind, port), reuse_port=False) as srv:
        print("ready", flush=True)
        srv.settimeout(timeout)
        conn, peer = srv.accept()
        with conn:
            conn.settimeout(timeout)
            buf = bytearray(CHUNK)
            total, first, last, start = 0, None, None, None
            while True:
                n = conn.recv_into(buf)
                if not n:
                    break
                last = time.perf_counter()
                if start is None:
                    start = last
                if first is None and last - start >= warmup:
                    first, n = last, 0  # the rate counts bytes after the first read (after the warm-up)
                total += n if first is not None else 0
    seconds = (last - first) if first is not None and last is not None else 0.0
    return {"bytes": total, "seconds": seconds, "bps": total * 8 / seconds if seconds > 0 else 0.0,
            "peer": peer[0], "local": bind}


def send(to: str, port: int, seconds: float, bind: str | None = None) -> int:
    data = memoryview(b"\0" * CHUNK)
    sent = 0
    with socket.create_connection((to, port), timeout=30, source_address=(bind, 0) if bind else None) as s:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            s.sendall(data)
            sent += CHUNK
    return sent


def echo(bind: str, port: int, timeout: float = 60) -> dict:
    with socket.create_server((bind, port), reuse_port=False) as srv:
        print("ready", flush=True)
        srv.settimeout(timeout)
        conn, _ = srv.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.settimeout(timeout)
            answered = 0
            while conn.recv(1):
                conn.sendall(b"\1")
                answered += 1
    return {"answered": answered}


def ping(to: str, port: int, count: int) -> list[float]:
    with socket.create_connection((to, port), timeout=30) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rtts = []
        for _ in range(count):
            t0 = time.perf_counter()
            s.sendall(b"\1")
            if not s.recv(1):
                raise RuntimeError("the echo end closed the connection")
            rtts.append(time.perf_counter() - t0)
    return rtts


@contextmanager
def _server(ns: str, args: list[str], python: str):
    """A ``bench.cluster.stream`` server in namespace ``ns``, ready; yields it, ended and reaped after."""
    proc = subprocess.Popen(["ip", "netns", "exec", ns, python, "-m", "bench.cluster.stream", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"stream {args[0]} did not start: {proc.stderr.read()[-2000:]}")
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _client(ns: str, args: list[str], python: str, timeout: float) -> dict:
    proc = subprocess.run(["ip", "netns", "exec", ns, python, "-m", "bench.cluster.stream", *args], check=True,
                          capture_output=True, text=True, timeout=timeout)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(src_ns: str, dst_ns: str, dst_addr: str, seconds: float = 2.0, port: int = PORT,
            python: str = sys.executable, warmup: float = 0.0) -> dict:
    """One stream from host namespace ``src_ns`` to ``dst_addr`` in ``dst_ns``; the receiver's JSON (``warmup``: the
    first seconds, not counted, come on top of ``seconds``)."""
    with _server(dst_ns, ["recv", "--bind", dst_addr, "--port", str(port), "--warmup", str(warmup)], python) as rx:
        _client(src_ns, ["send", "--to", dst_addr, "--port", str(port), "--seconds", str(seconds + warmup)], python,
                timeout=seconds + warmup + 60)
        out, err = rx.communicate(timeout=60)
        if rx.returncode != 0:
            raise RuntimeError(f"stream receiver failed: {err[-2000:]}")
        return json.loads(out.strip().splitlines()[-1])


def round_trips(src_ns: str, dst_ns: str, dst_addr: str, count: int = 200, port: int = PORT,
                python: str = sys.executable) -> list[float]:
    """``count`` one-byte TCP round trips (seconds) from host namespace ``src_ns`` to ``dst_addr`` in ``dst_ns``."""
    with _server(dst_ns, ["echo", "--bind", dst_addr, "--port", str(port)], python):
        return _client(src_ns, ["ping", "--to", dst_addr, "--port", str(port), "--count", str(count)], python,
                       timeout=120)["rtts"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.cluster.stream")
    sub = ap.add_subparsers(dest="mode", required=True)
    modes = {}
    for mode, peer in (("recv", "--bind"), ("echo", "--bind"), ("ping", "--to"), ("send", "--to")):
        modes[mode] = sub.add_parser(mode)
        modes[mode].add_argument(peer, required=True)
        modes[mode].add_argument("--port", type=int, default=PORT)
    modes["recv"].add_argument("--warmup", type=float, default=0.0)
    modes["ping"].add_argument("--count", type=int, default=200)
    modes["send"].add_argument("--seconds", type=float, default=2.0)
    modes["send"].add_argument("--bind")
    args = ap.parse_args(argv)
    if args.mode == "recv":
        print(json.dumps(recv(args.bind, args.port, warmup=args.warmup)), flush=True)
    elif args.mode == "echo":
        print(json.dumps(echo(args.bind, args.port)), flush=True)
    elif args.mode == "ping":
        print(json.dumps({"rtts": ping(args.to, args.port, args.count)}), flush=True)
    else:
        print(json.dumps({"sent": send(args.to, args.port, args.seconds, args.bind)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
