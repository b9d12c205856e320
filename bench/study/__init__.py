"""Studies: what the DVC pipeline runs, and publishing their results. One module per stage, so that each DVC stage
depends on its own code only (dvc.yaml; tests/single/test_pipeline_spec.py checks the lists):

    python -m bench study prepare         # prepare: data/prepared/<study>.json, the dataset loads, with its checksum
    python -m bench study calibrate       # calibrate: results/<study>/calibration.json, the target and link rates
    python -m bench study plan            # plan: results/<study>/plan/<algo>/, every planned run's config.json
    python -m bench study run ALGO        # run: papermill notebooks/run.ipynb with every planned run of ALGO
    python -m bench study analyse NB      # analyse: papermill notebooks/<NB>.ipynb (the analysis stages)
    python -m bench study publish --to D  # publish: tables, figures, metrics, report, runs.csv, system.md and a
                                          # README (readme) to D

``spec`` is what a study is (``pipelines/studies/<name>.yaml``, fields of :class:`StudySpec`) and reads its
calibration; ``cli`` is the command line. The study is params.yaml's ``study`` (``dvc exp run -S study=hermans``;
``--study`` here). A study names a training profile, algorithms, worker counts, ``--set`` overrides, a grid of
overrides (one run per point, tagged) and the hardware profiles it runs on (several are allowed; the default is
params.yaml's ``hardware``). ``plan`` resolves every run once; ``run`` copies each planned file into its run directory
and launches it unchanged. A failed benchmark run does not fail its stage: it is kept, marked failed, and shown as
failed.
"""

from .spec import Study, StudySpec, load_study, spec_of, study_analysis

__all__ = ["Study", "StudySpec", "load_study", "spec_of", "study_analysis"]
