"""A calibrated performance model of every algorithm: throughput, time split and staleness where nothing is measured.

``python -m bench predict ALGO[,ALGO...] --np N[,N...] --hardware HW [--profile P] [--set key=value ...] [--json]``
(:mod:`.cli`). The pieces, one job each:

- :mod:`.patterns`: what each registered algorithm sends, to whom, how often (one entry per registry key);
- :mod:`.hardware`: links, latency, topology and compute time of a machine (the emulated cluster from the calibration,
  the others from ``pipelines/hardware/model/<id>.yaml``) and the workload's size;
- :mod:`.model`: the step model; :mod:`.sim`: hosts with a CPU quota and the collective methods played step by step;
  :mod:`.queue`: the parameter server and AD-PSGD as queues of clients;
- :mod:`.calibrate`: the constants, fitted on micro-benchmarks and a named set of published runs only;
- :mod:`.cells` and :mod:`.validate`: every other measured cell of the published studies predicted and compared;
- :mod:`.anchors`: published results reproduced before forecasting (Horovod's 512-GPU scaling, a DGX-1, a DGX A100);
- :mod:`.nccl`: NCCL's allreduce as its own tuner prices it (ring or tree, each protocol), for described GPU hardware;
- :mod:`.forecast` and :mod:`.publish`: S(n) for n = 8 ... 256 on other hardware, and ``docs/results/predict/``.
"""
