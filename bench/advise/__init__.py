"""``python -m bench advise``: which way of parallelising wins on a hardware, from the model's forecasts.

    python -m bench advise --hardware emu-probed --np 4 [--profile regimes] [--algorithms a,b,...] [--out DIR]

Every registered algorithm (or ``--algorithms``) is forecast by ``bench predict``'s model on the hardware (best a file
``bench probe`` wrote from the user's own hosts) and ranked (:mod:`bench.advise.rank`): by the forecast time to the
target accuracy where a measured relation backs it, then, in a group of their own, by throughput where none does
("throughput only"). Each line carries the forecast's stated error (the validated cells nearest it) and the time
split that explains it (compute, communication, wait a step). :mod:`bench.advise.report` writes the ranking and a
map of which method wins as n and the link's one-way delay vary (results/advise/<hardware>/: advice.json,
ranking.csv, winners.csv, winners.png, index.html).
"""
