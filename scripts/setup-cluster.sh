#!/usr/bin/env bash
# What the emulated cluster (`python -m bench cluster up [--delay D] [--slurm]`) needs from the system: `ip`/`tc`
# (iproute2), `sshd` (openssh-server), for `--delay` the delay lines' needs (iptables for the NFQUEUE rules, a C
# compiler and libnetfilter-queue-dev to build bench/cluster/delayline.c; ping from iputils-ping, the tests'
# independent round-trip probe) and, for `--slurm`, Slurm (slurm-wlm: slurmctld, slurmd, sbatch, ...) and munge,
# from Debian's packages via apt-get.
#
# Idempotent and quiet: when everything is there it prints nothing and exits 0. Runs as root
# (it installs system packages). It never starts a system sshd, munged, slurmctld or slurmd: the suite
# runs its own daemons with their own configs under /run/distbench/dbemu, so while installing, service
# start-up is suppressed with a temporary /usr/sbin/policy-rc.d (only if the system has none; removed afterwards).
set -euo pipefail

need=()
command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1 || need+=(iproute2)
[ -x /usr/sbin/sshd ] || command -v sshd >/dev/null 2>&1 || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 && command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
[ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/slurmd ] && command -v sbatch >/dev/null 2>&1 || need+=(slurm-wlm)
[ -x /usr/sbin/munged ] || need+=(munge)
command -v iptables-nft >/dev/null 2>&1 || [ -x /usr/sbin/iptables-nft ] || need+=(iptables)
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
[ -e /usr/include/libnetfilter_queue/libnetfilter_queue.h ] || need+=(libnetfilter-queue-dev)
command -v ping >/dev/null 2>&1 || need+=(iputils-ping)
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
    echo "error: installing ${need[*]} needs root (run: sudo bash $0)" >&2
    exit 2
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: ${need[*]} missing and no apt-get here: install them with your system's package manager" >&2
    exit 2
fi

policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    made_policy=1
fi
cleanup() { if [ "$made_policy" = 1 ]; then rm -f "$policy"; fi; }
trap cleanup EXIT

echo "[setup-cluster] installing ${need[*]} (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
echo "[setup-cluster] done" >&2
