"""``python -m bench probe``: measure a cluster's hosts and links in one short horovodrun job, and write them as a
hardware description ``bench predict`` reads.

    python -m bench probe --hardware emu --np 4 [--profile regimes] [--set link=100mbit --set link_delay=5ms]
        [--out pipelines/hardware/model/emu-probed.yaml]

The job (:mod:`bench.probe.rank`) runs over the hardware profile's hosts as ``bench run`` would launch a run of
``--np`` workers there (the emulated cluster of ``emu``/``emu-*`` brought up or reshaped with the ``--set`` link, delay
and CPU shares; a hostfile, ``hosts`` list or Slurm allocation otherwise). Its measurements, each host's and each pair's
(:mod:`bench.probe.rank`), are reduced by :mod:`bench.probe.describe` into the file: the link's TCP goodput and the rate
it stands for, the one-way delay (half the median round trip), every host's CPU share and the workload's step time, and
the collectives at n beside the model's transport forecast of them. Each value names its source (``measured by bench
probe at <commit>, <UTC>, n, repeats``). Nothing is written unless the job completes.
"""
