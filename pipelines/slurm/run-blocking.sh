#!/bin/bash
# Submit a command as a Slurm job and wait for it: `sbatch --wait` returns when the job ends, with its exit code,
# so a DVC stage (or `make`) can depend on a job that runs on the cluster's compute nodes.
#   pipelines/slurm/run-blocking.sh [SBATCH OPTIONS --] COMMAND ...
#   pipelines/slurm/run-blocking.sh --nodes=4 -- dvc repro
set -euo pipefail
opts=()
if [[ " $* " == *" -- "* ]]; then
  while [[ "$1" != "--" ]]; do opts+=("$1"); shift; done
  shift
fi
[[ $# -gt 0 ]] || { echo "usage: $0 [SBATCH OPTIONS --] COMMAND ..." >&2; exit 2; }
here="$(cd "$(dirname "$0")" && pwd)"
exec sbatch --wait "${opts[@]}" "${here}/bench.sbatch" "$@"
