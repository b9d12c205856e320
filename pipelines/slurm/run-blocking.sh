#!/bin/bash
# Submit a command as a Slurm job and wait for it: returns when the job has ended (every process of it gone, the
# COMPLETING phase over), with its exit code, so a DVC stage (or `make`) can depend on a job that runs on the
# cluster's compute nodes.
#   pipelines/slurm/run-blocking.sh [SBATCH OPTIONS --] COMMAND ...
#   pipelines/slurm/run-blocking.sh --nodes=4 -- dvc repro
# Exit code: the job's; 2 at once, with one line, for a request that no node Slurm has up can run (more nodes, or
# more tasks or CPUs on a node, than the partition has: Slurm would queue it, pending for ever); a job that ended
# otherwise than COMPLETED (cancelled, timed out, node failure) never returns 0 (`sbatch --wait` can: polled while a
# cancelled job completes, it reads exit code 0). SIGTERM/SIGINT to this script (DVC cancelling the stage, Ctrl-C)
# cancels the job.
# The job's log: results/slurm-<submission time>-<job id>.log (printed), unless -o/--output chooses another.
# On this machine's emulated cluster (`python -m bench cluster up --slurm`) it finds that cluster's slurm.conf by
# itself: with SLURM_CONF unset and /run/distbench/dbemu/slurm/slurm.conf present, it sets SLURM_CONF to it and puts
# the emulated cluster's ssh wrapper first on PATH (the job's horovodrun reaches the other nodes with the suite's keys).
# Anywhere else (a real cluster has no such file) nothing changes.
set -euo pipefail
emu=/run/distbench/dbemu
if [[ -z "${SLURM_CONF:-}" && -f "${emu}/slurm/slurm.conf" ]]; then
  export SLURM_CONF="${emu}/slurm/slurm.conf"
  export PATH="${emu}/bin:${PATH}"
fi
opts=()
if [[ " $* " == *" -- "* ]]; then
  while [[ "$1" != "--" ]]; do opts+=("$1"); shift; done
  shift
fi
[[ $# -gt 0 ]] || { echo "usage: $0 [SBATCH OPTIONS --] COMMAND ..." >&2; exit 2; }
here="$(cd "$(dirname "$0")" && pwd)"
# `sbatch --test-only` submits nothing: it exits 1 when the controller finds no nodes that could ever run the request
# (nodes DOWN or DRAINED count as absent, nodes busy with other jobs do not); a real submission of it would be queued
# (EnforcePartLimits=NO, Slurm's default: pending with reason PartitionNodeLimit or Resources) and waited on for ever
if ! err="$(sbatch --test-only "${opts[@]}" "${here}/bench.sbatch" "$@" 2>&1)"; then
  have="$(sinfo -h -o '%P %D node(s) %t, %c CPUs each' 2>/dev/null | head -n 8 | paste -sd ';' - | sed 's/;/; /g' || true)"
  echo "run-blocking.sh: Slurm cannot run this request (${opts[*]:-the defaults of bench.sbatch}) on the nodes it has" \
       "(${have:-sinfo lists none}): $(tail -n 1 <<< "${err}")" >&2
  exit 2
fi
# the job's log names its submission time too: job ids start again at 1 with a new controller (the emulated
# cluster's, after `cluster down` and `up --slurm`), and a log is never overwritten
log=("--output=results/slurm-$(date +%Y%m%dT%H%M%S)-%j.log")
for opt in "${opts[@]}"; do
  case "${opt}" in -o* | --ou*) log=() ;; esac  # -o FILE, -oFILE, --output[=]FILE (or a prefix of it): the user's
done
[[ ${#log[@]} -eq 0 ]] || mkdir -p results
job="$(sbatch --parsable "${log[@]}" "${opts[@]}" "${here}/bench.sbatch" "$@")"
job="${job%%;*}"
if [[ ${#log[@]} -gt 0 ]]; then
  path="${log[0]#--output=}"
  echo "Submitted batch job ${job} (log: ${path//%j/${job}})"
else
  echo "Submitted batch job ${job}"
fi
errors="$(mktemp "${TMPDIR:-/tmp}/run-blocking.XXXXXX")"
trap 'rm -f "${errors}"' EXIT
trap 'scancel "${job}" 2>/dev/null || true; rm -f "${errors}"; trap - TERM INT; kill -TERM $$' TERM INT
# ask COMMAND...: sets `answer` to a Slurm query's output about the job. A controller that does not answer (busy or
# restarting under load: the query fails with "Socket timed out on send/recv operation" or "Unable to contact slurm
# controller", and prints nothing) is asked again every 5 s for up to 5 minutes: an empty answer is never taken from a
# failed query (that read a running job as ended). "Invalid job id" is an answer: the controller has forgotten the
# job (MinJobAge after it ended).
ask() {
  local since=${SECONDS}  # the queries' own time-outs (20 s each) count too, not only the pauses between them
  until answer="$("$@" 2>"${errors}")"; do
    if grep -q "Invalid job id" "${errors}"; then answer=""; return 0; fi
    if (( SECONDS - since >= 300 )); then
      echo "run-blocking.sh: the Slurm controller has not answered '$*' for $(( SECONDS - since )) s" \
           "($(tail -n 1 "${errors}")); job ${job} is left as it is (squeue -j ${job} once the controller answers)" >&2
      exit 1
    fi
    sleep 5 & wait $!
  done
}
# squeue lists the job until it has ended on every node (states PD, R, CG); then its record says how it ended
wait_s=1
while ask squeue -h -j "${job}" -o %t; [[ -n "${answer}" ]]; do
  sleep "${wait_s}" & wait $!
  wait_s=$(( wait_s < 8 ? wait_s * 2 : 10 ))
done
ask scontrol -o show job "${job}"
record="${answer}"
state="$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<< "${record}")"
code="$(sed -n 's/.* ExitCode=\([0-9]*\):\([0-9]*\).*/\1 \2/p' <<< "${record}")"
read -r status signal <<< "${code:-1 0}"
if [[ "${state}" == COMPLETED ]]; then exit "${status}"; fi
echo "run-blocking.sh: job ${job} ended ${state:-(its record is gone)}, exit code ${status}:${signal}" >&2
if (( status != 0 )); then exit "${status}"; fi
if (( signal != 0 )); then exit $(( 128 + signal )); fi
exit 1
