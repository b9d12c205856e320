"""Namespaces, veth pairs, the bridge and the link shaping.

Topology (see :mod:`bench.cluster.spec` for the names)::

    root namespace (the launcher: horovodrun, its rendezvous server)
      bridge dbemu0 198.18.0.1/24
        |-- dbemu-v0 ==veth== dbemu0 198.18.0.2/24   [netns dbemu-h0]
        |-- dbemu-v1 ==veth== dbemu0 198.18.0.3/24   [netns dbemu-h1]
        ...

Shaping. This kernel has ``tbf`` and ``htb`` but no ``netem`` (nor fq/fq_codel/sfq), so ``tc`` emulates the
bandwidth of a link and the latency comes from the hosts' delay lines (:mod:`.delay`). Every veth end gets a ``tbf`` root qdisc
at the link rate: the host-side end limits what the host sends, the root-side end (egress of the
bridge port) what it receives, so a flow between two hosts crosses two shapers at the same rate,
and each host has the full rate up *and* down, like a host on a switch. The token bucket must hold
at least one GSO super-packet (veth passes up to 64 KiB at once; bigger ones tbf segments) and a
few milliseconds of traffic, else TCP cannot keep the link busy. Its queue holds 25 ms of traffic, or one round trip
(2 x the delay) where that is more: a bottleneck buffer of one bandwidth-delay product, without which TCP on a long
delayed link backs off below the rate after each loss.

IPv6 is disabled on everything the suite makes: gloo takes the first address of the interface
it is told to use, and an IPv6 link-local address there would be unusable.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

from . import sh
from .spec import (
    BRIDGE,
    BRIDGE_ADDRESS,
    IFNAME,
    PREFIX,
    SUBNET,
    host_address,
    netns_name,
    parse_delay,
    parse_rate,
    veth_root_name,
)

#: Names the suite makes, exactly: nothing else with a similar name is ever touched.
NETNS_RE = re.compile(rf"^{PREFIX}-h\d+$")
LINK_RE = re.compile(rf"^(?:{PREFIX}-v\d+|{BRIDGE})$")


def tbf_burst_bytes(bps: float) -> int:
    """Bytes the tbf of a link of ``bps`` bits a second lets through at once after an idle spell: >= one GSO
    packet, >= 4 ms of traffic."""
    return max(64 * 1024, int(bps / 8 * 0.004))


def tbf_args(link: str, delay: str = "") -> list[str]:
    """``tc`` arguments of the tbf qdisc for ``link`` (e.g. ``1gbit``) with the one-way ``delay`` (e.g. ``5ms``)."""
    bps = parse_rate(link)
    burst = tbf_burst_bytes(bps)
    queue_us = max(25_000, round(2e6 * parse_delay(delay)))  # >= 25 ms, >= one round trip
    return ["tbf", "rate", f"{int(bps)}bit", "burst", str(burst), "latency", f"{queue_us}us"]


def _disable_ipv6(ifname: str, ns: str | None = None) -> None:
    path = f"/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6"
    if ns is None:
        if Path(path).exists():
            Path(path).write_text("1\n")
    else:
        sh.ok(sh.in_netns(ns, ["sh", "-c", f"[ ! -e {path} ] || echo 1 > {path}"]))


def create_bridge() -> None:
    sh.run(["ip", "link", "add", "name", BRIDGE, "type", "bridge"])
    # bridged frames must not go through the root namespace's iptables (br_netfilter may be loaded)
    sh.ok(["ip", "link", "set", BRIDGE, "type", "bridge", "nf_call_iptables", "0", "nf_call_ip6tables", "0",
           "nf_call_arptables", "0"])
    _disable_ipv6(BRIDGE)
    sh.run(["ip", "addr", "add", f"{BRIDGE_ADDRESS}/{SUBNET.prefixlen}", "dev", BRIDGE])
    sh.run(["ip", "link", "set", BRIDGE, "up"])


def add_host(i: int) -> None:
    """Namespace ``dbemu-h<i>`` with veth end ``dbemu0`` at 198.18.0.<i+2>, its peer on the bridge."""
    ns, veth = netns_name(i), veth_root_name(i)
    sh.run(["ip", "netns", "add", ns])
    no_ipv6 = "for k in all default; do echo 1 > /proc/sys/net/ipv6/conf/$k/disable_ipv6; done 2>/dev/null; true"
    sh.run(sh.in_netns(ns, ["sh", "-c", no_ipv6]))
    sh.run(["ip", "link", "add", "name", veth, "type", "veth", "peer", "name", IFNAME, "netns", ns])
    _disable_ipv6(veth)
    sh.run(["ip", "link", "set", veth, "master", BRIDGE, "up"])
    sh.run(["ip", "-n", ns, "addr", "add", f"{host_address(i)}/{SUBNET.prefixlen}", "dev", IFNAME])
    sh.run(["ip", "-n", ns, "link", "set", IFNAME, "up"])
    sh.run(["ip", "-n", ns, "link", "set", "lo", "up"])


def shape(i: int, link: str, delay: str = "") -> None:
    """Set (or change in place, or remove for ``""``) the rate of host i's link, both directions (its queue sized for
    the one-way ``delay``)."""
    ns, veth = netns_name(i), veth_root_name(i)
    for prefix, dev in ((["tc"], veth), (["tc", "-n", ns], IFNAME)):
        if link:
            sh.run([*prefix, "qdisc", "replace", "dev", dev, "root", *tbf_args(link, delay)])
        else:
            sh.ok([*prefix, "qdisc", "del", "dev", dev, "root"])


def qdiscs(i: int) -> dict[str, str]:
    """The root qdisc line of both ends of host i's link (for status and tests)."""
    out = {}
    for prefix, dev in ((["tc"], veth_root_name(i)), (["tc", "-n", netns_name(i)], IFNAME)):
        proc = sh.run([*prefix, "qdisc", "show", "dev", dev, "root"], check=False)
        out[dev] = proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else ""
    return out


def list_netns() -> list[str]:
    """The suite's namespaces that exist (``dbemu-h<i>``), in host order."""
    proc = sh.run(["ip", "netns", "list"], check=False)
    names = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    return sorted((n for n in names if NETNS_RE.match(n)), key=lambda n: int(n.rsplit("h", 1)[1]))


def list_links() -> list[str]:
    """The suite's interfaces in the root namespace (the bridge and the ``dbemu-v<i>`` veth ends)."""
    proc = sh.run(["ip", "-o", "link", "show"], check=False)
    names = [line.split(":")[1].strip().split("@")[0] for line in proc.stdout.splitlines() if ":" in line]
    return [n for n in names if LINK_RE.match(n)]


def subnet_users() -> list[str]:
    """Interfaces of the root namespace, not the suite's, with an address in the suite's subnet (a clash)."""
    proc = sh.run(["ip", "-o", "-4", "addr", "show"], check=False)
    out = []
    for line in proc.stdout.splitlines():
        f = line.split()
        if (len(f) > 3 and f[2] == "inet" and not LINK_RE.match(f[1])
                and ipaddress.ip_interface(f[3]).network.overlaps(SUBNET)):
            out.append(f"{f[1]} {f[3]}")
    return out


def _admin_up(prefix: list[str], dev: str) -> bool:
    proc = sh.run([*prefix, "-o", "link", "show", "dev", dev], check=False)
    flags = proc.stdout.split("<", 1)[1].split(">", 1)[0].split(",") if "<" in proc.stdout else []
    return proc.returncode == 0 and "UP" in flags


def down_links(hosts) -> list[str]:
    """The links of ``hosts`` (host indices) that are not up (the bridge, each host's veth at either end), named for a
    reason (``emulated host 2's link (dbemu-v2, the bridge's end) is down``); empty when every link is up."""
    down = [] if _admin_up(["ip"], BRIDGE) else [f"the bridge {BRIDGE} is down"]
    for i in hosts:
        for prefix, dev, end in ((["ip"], veth_root_name(i), "the bridge's end"),
                                 (["ip", "-n", netns_name(i)], IFNAME, "the host's end")):
            if not _admin_up(prefix, dev):
                down.append(f"emulated host {i}'s link ({dev}, {end}) is down")
    return down


def netns_pids(ns: str) -> list[int]:
    proc = sh.run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def delete_all() -> None:
    """Remove every namespace and root-namespace link of the suite (processes must be gone first:
    a namespace a process still holds outlives ``ip netns del``, and with it its veth pair)."""
    for ns in list_netns():
        sh.ok(["ip", "netns", "del", ns])
    for link in list_links():
        if link != BRIDGE:
            sh.ok(["ip", "link", "del", link])
    if BRIDGE in list_links():
        sh.ok(["ip", "link", "del", BRIDGE])
