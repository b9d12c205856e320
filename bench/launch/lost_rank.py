"""Which rank was lost, read from horovodrun's output: a rank killed by a signal or lost over ssh cannot write its
own reason, and its peers then fail with secondary errors ("Horovod has been shut down"); horovodrun's lines on how
each rank ended (:func:`is_exit_evidence`, kept whole however long the job's log) name it (:func:`lost_rank`), and
:func:`name_killed_rank` puts it first in the run's reason."""

from __future__ import annotations

import re
import signal
from pathlib import Path

from ..results import read_json, write_json_atomic

SSH_FAILED = 255  # ssh's own exit code: the connection or the remote side failed (not 128 + a signal)


def lost_rank_reason(code: int, over_ssh: bool) -> str | None:
    """Why a rank whose process ended with exit ``code`` (as horovodrun reports it) is gone, or None when the code
    says no more than an ordinary failure. Over ssh, 255 is ssh's own failure (the connection dropped, the host or
    its sshd went away, or the remote process was killed), never 128 + a signal; locally 129..128+NSIG is a signal."""
    if over_ssh and code == SSH_FAILED:
        return (f"lost over ssh (ssh exit code {code}: the connection to the rank's host failed or the remote process "
                f"was killed)")
    if 128 < code < 128 + signal.NSIG:
        return f"killed by signal {code - 128} (exit code {code})"
    return None


_EXIT_LINE = re.compile(r"^Process (\d+) exit with status code (-?\d+)\.")
_TERMINATING_LINE = re.compile(r"^Terminating remaining workers after failure of Process (\d+)\.")
_FIRST_EXIT = re.compile(r"first process to do so was:\s*Process name: (\d+)\s*Exit code: (\d+)")
_PEER_CLOSED = re.compile(r"\[(\d+)\]<std(?:out|err)>:.*(?:Connection closed by peer|Read error|Write error) "
                          r"\[([^\]]+)\]:\d+")  # gloo's transport, on a connection to ADDR


_SHELL_KILLED = re.compile(r"^\[(\d+)\]<stderr>:Killed\s*$")  # the shell horovodrun starts a rank in: its child got SIGKILL


def is_exit_evidence(line: str) -> bool:
    """A line of horovodrun's output that :func:`lost_rank` reads (kept whole, however long the job's log)."""
    return bool(_EXIT_LINE.match(line) or _TERMINATING_LINE.match(line) or _PEER_CLOSED.search(line)
                or _SHELL_KILLED.match(line))


def lost_rank(lines, over_ssh: bool, hosts_by_rank: list[str] | None = None) -> tuple[int, str] | None:
    """The rank that was lost (killed, or gone over ssh) and so caused the job's failure, with how, read from
    horovodrun's output; None when nothing shows one. horovodrun prints "Process N exit with status code C." for
    every rank that ends non-zero, and "Terminating remaining workers after failure of Process K." once, when it
    starts ending the others: an exit code after that line may be horovodrun's own doing (ssh, terminated, exits
    255 too). So a rank is named when

    1. its exit code says lost or killed and it ended before horovodrun terminated anyone, or
    2. its exit code says lost or killed and a peer's transport saw its connection close ("Connection closed by
       peer [ADDR]" or a read or write error on it, ADDR the host of that rank alone): it went first, even where a peer's secondary error
       ("Horovod has been shut down") reached horovodrun before ssh reported the loss;
    3. horovodrun reported no exit for it at all (it ended the job first, before ssh reported the loss), or only a
       signal's exit code after it began terminating (its own SIGTERM, reaching an ssh client that was stalled), and a
       peer's transport saw its connection close before horovodrun terminated anyone: the reason then says only
       that its connection closed first, not how it ended.

    4. its exit code says killed and the shell that horovodrun started it in printed "Killed" (its child got SIGKILL)
       before horovodrun terminated anyone: it was killed first, even where a peer's secondary error reached
       horovodrun first (seen in CI under load: rank 1 "Killed", then "Process 0 exit ... 1", then rank 1's 137).

    Without per-process lines, horovodrun's "first process to do so was" is read as in case 1."""
    lines = list(lines)
    exits, peers_saw, terminating, killed_early = [], [], False, set()
    for line in lines:
        if _TERMINATING_LINE.match(line):
            terminating = True
        elif m := _SHELL_KILLED.match(line):
            if not terminating:
                killed_early.add(int(m.group(1)))
        elif m := _EXIT_LINE.match(line):
            exits.append((int(m.group(1)), int(m.group(2)), not terminating))
        elif m := _PEER_CLOSED.search(line):
            peers_saw.append((int(m.group(1)), m.group(2), not terminating))
    if not exits and (m := _FIRST_EXIT.search("\n".join(lines))):
        exits = [(int(m.group(1)), int(m.group(2)), True)]
    for rank, code, before_termination in exits:
        why = lost_rank_reason(code, over_ssh)
        if why is not None and before_termination:
            return rank, why
    seen_by, seen_early = {}, {}
    for peer, addr, before_termination in peers_saw:
        on_host = [r for r, h in enumerate(hosts_by_rank or []) if h == addr and r != peer]
        if len(on_host) == 1:
            seen_by.setdefault(on_host[0], peer)
            if before_termination:
                seen_early.setdefault(on_host[0], peer)
    late_signal = {}  # rank -> a signal's exit code reported after the termination began: horovodrun's own SIGTERM
    for rank, code, before_termination in exits:
        why = lost_rank_reason(code, over_ssh)
        if why is not None and rank in seen_by:
            if before_termination or code == SSH_FAILED:
                return rank, f"{why}, and rank {seen_by[rank]} saw its connection close first"
            late_signal.setdefault(rank, code)
    for rank, code, _ in exits:
        why = lost_rank_reason(code, over_ssh)
        if why is not None and rank in killed_early:
            return rank, why
    reported = {rank for rank, _, _ in exits}
    for rank, peer in seen_early.items():
        if peer not in reported:
            continue
        if rank in late_signal:
            return rank, (f"its connection closed first (rank {peer} saw it close; its exit code "
                          f"{late_signal[rank]} came after horovodrun began ending the job, so it is horovodrun's "
                          f"own signal, not how the rank was lost)")
        if rank not in reported:
            return rank, (f"its connection closed first (rank {peer} saw it close; horovodrun ended the job before "
                          f"reporting this rank's exit)")
    return None


def name_killed_rank(run_dir: Path, lines, over_ssh: bool = False) -> None:
    """A rank killed by a signal (or lost over ssh) cannot write its own reason, and its peers then fail with
    secondary errors (e.g. "Horovod has been shut down"): when horovodrun's output shows which rank was lost
    (:func:`lost_rank`), put that rank first in the reason."""
    system = read_json(run_dir / "system.json") if (run_dir / "system.json").exists() else {}
    found = lost_rank(lines, over_ssh, (system.get("network") or {}).get("hosts_by_rank"))
    if found is None:
        return
    rank, why = found
    summary = read_json(run_dir / "summary.json")
    if not str(summary.get("reason", "")).startswith(f"rank {rank}:"):
        summary["reason"] = f"rank {rank}: {why}; then: {summary.get('reason', '')}"
        summary["failed_rank"] = rank
        write_json_atomic(run_dir / "summary.json", summary)
