#!/usr/bin/env bash
# GPU set-up (`make setup GPU=cu13`, or GPU=cu12): a CUDA torch 2.13.0 and its torchvision, the CUDA toolkit and
# NCCL from NVIDIA's registry packages, and Horovod built with HOROVOD_GPU_OPERATIONS=NCCL against them, then the
# rest of scripts/setup.sh (the suite, the check of `horovodrun --check-build`, which must show NCCL).
# Compiling needs no GPU (checked on a CPU-only machine: docs/results/gpu-setup/); running needs one.
#
#   GPU=cu13  torch 2.13.0 from PyPI (its Linux wheel is the CUDA 13.0 build); cuda-toolkit 13.0 (nvcc, cudart, cccl,
#             crt, nvvm) and nvidia-nccl-cu13. CUDA 13 supports compute capability >= 7.5 (Turing and later):
#             not the DGX-1's P100/V100; use cu12 there.
#   GPU=cu12  torch 2.13.0 from PyTorch's cu12 index (TORCH_INDEX, default https://download.pytorch.org/whl/cu128;
#             the cu12 builds are not on PyPI), nvidia-cuda-{nvcc,runtime,cccl}-cu12 and nvidia-nccl-cu12, whose
#             separate directories are joined into one CUDA home ($VENV/cuda) for Horovod's CMake.
#
# Environment: as scripts/setup.sh (PYTHON, VENV, BENCH_CACHE), plus GPU, TORCH_INDEX,
# HOROVOD_BUILD_CUDA_CC_LIST (compute capabilities of Horovod's kernels; default: every one nvcc supports).
set -euo pipefail
cd "$(dirname "$0")/.."

GPU=${GPU:-}
PYTHON=${PYTHON:-python3.11}
VENV=${VENV:-.venv}
case "$GPU" in
  cu13) PKGS=("cuda-toolkit[nvcc,cudart,cccl,crt,nvvm]~=13.0.0" nvidia-nccl-cu13); INDEX=() ;;
  cu12) PKGS=(nvidia-cuda-nvcc-cu12 nvidia-cuda-runtime-cu12 nvidia-cuda-cccl-cu12 nvidia-nccl-cu12)
        INDEX=(--index-url "${TORCH_INDEX:-https://download.pytorch.org/whl/cu128}" --extra-index-url https://pypi.org/simple) ;;
  *) echo "setup-gpu: GPU='$GPU' is not a known CUDA variant; valid: cu12, cu13" >&2; exit 2 ;;
esac
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "setup-gpu: '$PYTHON' not found; set PYTHON=python3.11" >&2; exit 2
fi
pyver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$pyver" != 3.11 ]; then
  echo "setup-gpu: Python $pyver: the GPU set-up is built and checked on Python 3.11 only (Horovod 0.28.1's setup.py imports distutils, removed in 3.12); set PYTHON=python3.11" >&2
  exit 2
fi
say() { printf '[setup-gpu] %s\n' "$*"; }
[ -x "$VENV/bin/python" ] || { say "creating $VENV with $($PYTHON --version)"; "$PYTHON" -m venv "$VENV"; }
PY="$VENV/bin/python"

if ! "$PY" -c "import torch, sys; sys.exit(not torch.backends.cuda.is_built())" 2>/dev/null; then
  say "installing a CUDA ($GPU) torch 2.13.0, torchvision 0.28.0, the CUDA toolkit and NCCL (several GB)"
  "$PY" -m pip --disable-pip-version-check -q install "${INDEX[@]}" torch==2.13.0 torchvision==0.28.0 "${PKGS[@]}"
fi
cuda=$("$PY" -c "import torch; print(torch.version.cuda or '')")
case "$cuda" in
  "${GPU#cu}".*) ;;
  *) echo "setup-gpu: the torch in $VENV is $("$PY" -c 'import torch; print(torch.__version__)') (CUDA '${cuda}'), not a $GPU build; remove $VENV or pick GPU=cu${cuda%%.*}" >&2; exit 1 ;;
esac

site=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
if [ "$GPU" = cu13 ]; then
  cuda_home="$site/nvidia/cu13"   # one tree: bin/nvcc, include, lib
else
  cuda_home="$PWD/$VENV/cuda"     # the cu12 packages unpack one directory each: join them
  mkdir -p "$cuda_home/bin" "$cuda_home/include" "$cuda_home/lib64"
  for d in "$site"/nvidia/cuda_nvcc "$site"/nvidia/cuda_runtime "$site"/nvidia/cuda_cccl; do
    for sub in bin include lib nvvm; do
      [ -d "$d/$sub" ] || continue
      target=$cuda_home/$sub; [ "$sub" = lib ] && target=$cuda_home/lib64
      mkdir -p "$target"; cp -rsn "$d/$sub/." "$target/"
    done
  done
fi
[ -x "$cuda_home/bin/nvcc" ] || { echo "setup-gpu: no nvcc under $cuda_home after installing ${PKGS[*]}" >&2; exit 1; }
# The registry packages carry versioned libraries only (libcudart.so.13, libnccl.so.2): CMake links the unversioned names.
for lib in "$cuda_home"/lib*/libcudart.so.* "$site"/nvidia/nccl/lib/libnccl.so.*; do
  [ -e "$lib" ] && ln -sf "$(basename "$lib")" "${lib%.so.*}.so"
done
[ -d "$cuda_home/lib" ] && [ ! -e "$cuda_home/lib64" ] && ln -s lib "$cuda_home/lib64"

say "CUDA $("$cuda_home/bin/nvcc" --version | grep -o 'release [0-9.]*'), NCCL from $site/nvidia/nccl"
export HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_CUDA_HOME="$cuda_home" CUDA_HOME="$cuda_home" \
       HOROVOD_NCCL_HOME="$site/nvidia/nccl" HOROVOD_NCCL_LINK=SHARED HOROVOD_BUILD_VARIANT="nccl-$GPU"
PYTHON="$PYTHON" VENV="$VENV" bash scripts/setup.sh
