"""Point-to-point throughput between two emulated hosts: one TCP stream, plain Python sockets (no iperf).

``python -m bench.cluster.stream recv --bind ADDR [--port P]`` accepts one connection, reads it to
the end and prints one JSON line (bytes, seconds from the first to the last byte, bits/s);
``python -m bench.cluster.stream send --to ADDR [--port P] --seconds T`` writes 1 MiB chunks for T
seconds. :func:`measure` runs the pair with ``ip netns exec`` in two host namespaces and returns
what the receiver saw, so the figure is the goodput that crossed both hosts' shaped links.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time

PORT = 5201
CHUNK = 1 << 20


def recv(bind: str, port: int, timeout: float = 60) -> dict:
    with socket.create_server((bind, port), reuse_port=False) as srv:
        print("ready", flush=True)
        srv.settimeout(timeout)
        conn, peer = srv.accept()
        with conn:
            conn.settimeout(timeout)
            buf = bytearray(CHUNK)
            total, first, last = 0, None, None
            while True:
                n = conn.recv_into(buf)
                if not n:
                    break
                last = time.perf_counter()
                if first is None:
                    first, n = last, 0  # the rate counts bytes after the first read
                total += n
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


def measure(src_ns: str, dst_ns: str, dst_addr: str, seconds: float = 2.0, port: int = PORT,
            python: str = sys.executable) -> dict:
    """One stream from host namespace ``src_ns`` to ``dst_addr`` in ``dst_ns``; the receiver's JSON."""
    rx = subprocess.Popen(["ip", "netns", "exec", dst_ns, python, "-m", "bench.cluster.stream", "recv",
                           "--bind", dst_addr, "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    try:
        if rx.stdout.readline().strip() != "ready":
            raise RuntimeError(f"stream receiver did not start: {rx.stderr.read()[-2000:]}")
        subprocess.run(["ip", "netns", "exec", src_ns, python, "-m", "bench.cluster.stream", "send", "--to", dst_addr,
                        "--port", str(port), "--seconds", str(seconds)], check=True, capture_output=True,
                       timeout=seconds + 60)
        out, err = rx.communicate(timeout=60)
        if rx.returncode != 0:
            raise RuntimeError(f"stream receiver failed: {err[-2000:]}")
        return json.loads(out.strip().splitlines()[-1])
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.cluster.stream")
    sub = ap.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--bind", required=True)
    r.add_argument("--port", type=int, default=PORT)
    s = sub.add_parser("send")
    s.add_argument("--to", required=True)
    s.add_argument("--port", type=int, default=PORT)
    s.add_argument("--seconds", type=float, default=2.0)
    s.add_argument("--bind")
    args = ap.parse_args(argv)
    if args.mode == "recv":
        print(json.dumps(recv(args.bind, args.port)), flush=True)
    else:
        print(json.dumps({"sent": send(args.to, args.port, args.seconds, args.bind)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
