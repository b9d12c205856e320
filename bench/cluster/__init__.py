"""An emulated cluster on one Linux machine: one network namespace per host, shaped links, an sshd per host.

``python -m bench cluster up --hosts 4 --link 1gbit [--delay 5ms] [--slots 1] [--cpu HOST=SHARE ...]`` makes:

- one network namespace per host (``dbemu-h<i>``), joined by a veth pair each to one bridge in the
  root namespace, addresses from 198.18.0.0/15 (reserved for network benchmarking);
- each host's link shaped in both directions to the rate (``tbf``);
- with ``--delay D``, a delay line per host that holds the host's ingress D (NFQUEUE, :mod:`.delay`; the kernel has
  no ``netem``), so that a round trip between two hosts takes 2D;
- an sshd per host listening on that host's address only, key login with keys the suite keeps in
  its private directory ``/run/distbench/dbemu`` (never ``~/.ssh``);
- optionally a share of a core per host (cgroup v1 ``cpu``), to make one host slower;
- with ``--slurm``, Slurm: munged and slurmctld on the launcher, a slurmd per host in its namespace and CPU
  share (:mod:`.slurm`; ``pipelines/slurm/run-blocking.sh`` submits to it).

``horovodrun`` runs in the root namespace and reaches the hosts over ssh like real machines:
``launch_settings()`` gives the hostfile, ``--network-interface dbemu0`` (the name of the bridge
*and* of every host's interface, see :mod:`.spec`), the ssh port and identity, and the PATH that puts
the suite's ssh wrapper first. Modules: :mod:`.spec` (names, Spec, State), :mod:`.net` (namespaces,
links, shaping), :mod:`.delay` (the delay lines), :mod:`.sshd`, :mod:`.cgroups`, :mod:`.lifecycle` (up/down/ensure),
:mod:`.hostfile`,
:mod:`.cli`; :mod:`.stream` and :mod:`.probe` are small programs run inside the hosts (a TCP stream,
a Horovod + torch.distributed check).

API (all raise :class:`bench.BenchError` with a one-line reason)::

    check_supported()                 # root, netns with veth/bridge/tbf, ip/tc, sshd (names the install command)
    check_delay(launch)               # a run's delay: valid, on an emulated cluster (bench.runconfig.check_values)
    check_delay_support(launch)       # root and NFQUEUE here for it (the resolver's check_machine)
    state() -> State | None           # the live cluster, or None
    up(Spec(hosts, slots, link, cpu, delay))  # replaces any cluster or leftovers of the suite's; installs on first use
    down() -> bool                    # removes everything of the suite's; False (no-op) if there was nothing
    ensure(spec) -> State             # up if absent/broken/too small, else reshape link/cpu/slots in place
    in_use(job)                       # context: hold the cluster for a job; others' up/down/reshape/rebuild refused
    launch_settings(state, processes, server_host) -> dict
        # processes = horovodrun -np (with server_host, the last rank is the server, on a host of its own);
        # keys hostfile, network_interface, ssh_port, ssh_identity_file, hosts (per rank), link, delay, delay_lines,
        # emulated,
        # np, env (add to horovodrun's environment: PATH with the suite's ssh wrapper first)
    horovodrun_args(settings)         # ["-np", N, "--hostfile", H, "--network-interface", IF, "-p", PORT,
                                      #  "--ssh-identity-file", KEY]
    watched(settings, run_dirs)       # context: a Watch whose check() raises DelayLineDown if a delay line
                                      # died; records their CPU in system.json afterwards

Only one emulated cluster exists per machine (its names are fixed); operations are serialised by a lock.
"""

from .delay import DelayLineDown, watched
from .delay import check_machine as check_delay_support
from .delay import check_value as check_delay
from .hostfile import horovodrun_args, launch_settings, placement, write_hostfile
from .lifecycle import check_supported, down, ensure, in_use, leftovers, start_slurm, state, up
from .spec import Host, Spec, State, parse_delay, parse_rate

__all__ = [
           "DelayLineDown",
           "Host",
           "Spec",
           "State",
           "check_delay", "check_delay_support",
           "check_supported",
           "down",
           "ensure",
           "horovodrun_args",
           "in_use",
           "launch_settings",
           "leftovers",
           "parse_delay",
           "parse_rate",
           "placement",
           "start_slurm",
           "state",
           "up",
           "watched",
           "write_hostfile",
]
