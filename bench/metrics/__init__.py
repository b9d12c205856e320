"""Metrics of benchmark runs, one module per job, used by the CLI, the notebooks and the tests.

- :mod:`.selection`  which runs are aggregated (``ok`` only) and how they are keyed;
- :mod:`.throughput` throughput (one definition) and speedup;
- :mod:`.timesplit`  compute / communication / wait per step;
- :mod:`.accuracy`   time-to-accuracy, accuracy after a budget, evaluation points;
- :mod:`.staleness`  τ per commit of the asynchronous algorithms;
- :mod:`.temporal`   Hermans' temporal efficiency;
- :mod:`.dvcfiles`   the metric files DVC declares;
- :mod:`.report`     run status and hardware for the report.

Every function takes loaded runs (:class:`bench.results.Run`) or tidy frames and returns numbers or
DataFrames; nothing here draws (see :mod:`bench.plots`). Import the module you need
(``from bench.metrics import throughput``); this package imports none of them, so the worker loads
only the throughput definition. Definitions: docs/algorithms.md.
"""
