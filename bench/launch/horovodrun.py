"""``python -m bench.launch.horovodrun ARGS``: Horovod's ``horovodrun ARGS`` (every job the suite launches starts
through it), answering horovodrun's per-launch build question from the suite's cached one.

On every launch horovodrun asks whether Horovod was built with the job's controller (``--gloo``: Horovod's
``horovod.common.util.gloo_built``, ``--mpi``: ``mpi_built``) by importing each framework's extension in a forked
child: TensorFlow's, then PyTorch's, i.e. the whole of torch, about 3.3 s of every job's start on 2 cores
(measured 2026-11-29, ``python -m cProfile horovodrun ...``). The answer cannot change between launches of one
installation, and the suite already has it: :func:`bench.system.horovod_build` (``horovodrun --check-build``, cached
per Horovod build), which :func:`bench.supports.check_build` reads to refuse an unbuilt controller before any job.
Here horovodrun's two questions read that record; where it has no answer (the check failed), horovodrun asks its
own way. Everything else is horovodrun's command line, unchanged."""

from __future__ import annotations

import sys

from ..system import horovod_build


def main(argv: list[str]) -> None:
    from horovod.runner import launch

    available = horovod_build().get("available") or {}
    if "Gloo" in available and "MPI" in available:
        launch.gloo_built = lambda verbose=False: available["Gloo"]
        launch.mpi_built = lambda verbose=False: available["MPI"]
    sys.argv = ["horovodrun", *argv]
    sys.exit(launch.run_commandline())


if __name__ == "__main__":
    main(sys.argv[1:])
