#!/usr/bin/env bash
# Set up .venv for the suite on a fresh machine (idempotent; a second run is quick).
#
#   torch 2.13.0 (CPU build; pinned so pip never pulls a multi-GB CUDA build)
#   Horovod 0.28.1, built from its PyPI source package with the C++17 fix (Horovod's
#     last release sets CMAKE_CXX_STANDARD 14, which torch >= 2.1 rejects), cached as a
#     wheel under $BENCH_CACHE so the next set-up skips the ~10 minute build
#   the suite itself (pip install -e .[dev]) and a check of `horovodrun --check-build`
#
# Environment: PYTHON (default python3.11), VENV (default .venv), BENCH_CACHE
# (default ${XDG_CACHE_HOME:-$HOME/.cache}/distbench), TORCH_SPEC (default torch==2.13.0),
# HOROVOD_GPU_OPERATIONS (NCCL for a GPU build: scripts/setup-gpu.sh sets it, with the CUDA and NCCL homes),
# TORCHVISION_SPEC (default torchvision==0.28.0, the release built for torch 2.13.0; see below).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
VENV=${VENV:-.venv}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
HOROVOD_VERSION=0.28.1
BENCH_CACHE=${BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/distbench}
say() { printf '[setup] %s\n' "$*"; }

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "setup: '$PYTHON' not found; Horovod 0.28.1 needs Python 3.11 (3.12 lacks distutils). Set PYTHON=..." >&2
  exit 2
fi
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip --disable-pip-version-check -q)

if ! "$PY" -c "import torch" 2>/dev/null; then
  say "installing $TORCH_SPEC"
  "${PIP[@]}" install "$TORCH_SPEC"
fi
TORCH_VERSION=$("$PY" -c "import torch; print(torch.__version__)")

# torchvision (alexnet, googlenet, resnet18, resnet50), without its dependencies so that it never replaces torch.
# Its wheel must be built for this torch's device: PyPI's is the CUDA one, which cannot load beside a CPU torch
# (the CPU wheel, 0.28.0+cpu, is on https://download.pytorch.org/whl/cpu); one that does not import is removed again,
# and the suite then names those models unavailable.
if ! "$PY" -c "import torchvision" 2>/dev/null; then
  "${PIP[@]}" install --no-deps "${TORCHVISION_SPEC:-torchvision==0.28.0}" || true
  if ! err=$("$PY" -c "import torchvision" 2>&1); then
    "${PIP[@]}" uninstall -y torchvision >/dev/null 2>&1 || true
    say "torchvision left out: ${TORCHVISION_SPEC:-torchvision==0.28.0} does not import beside torch $TORCH_VERSION ($(tail -1 <<<"$err")); set TORCHVISION_SPEC to the build for this torch (e.g. 'torchvision==0.28.0+cpu --index-url https://download.pytorch.org/whl/cpu')"
  fi
fi

# Build dependencies of Horovod's setup.py (no build isolation: isolation would pull a CUDA torch).
"${PIP[@]}" install "cmake>=3.13,<5" packaging psutil pyyaml cloudpickle cffi wheel setuptools

if ! "$PY" -c "import horovod.torch" 2>/dev/null; then
  variant=${HOROVOD_BUILD_VARIANT:-${HOROVOD_GPU_OPERATIONS:-cpu}}
  wheelhouse="$BENCH_CACHE/wheels/horovod-$HOROVOD_VERSION-torch$TORCH_VERSION-$variant"
  mkdir -p "$wheelhouse"
  if ! ls "$wheelhouse"/horovod-*.whl >/dev/null 2>&1; then
    say "building Horovod $HOROVOD_VERSION against torch $TORCH_VERSION (5-12 minutes on 2 cores; cached in $wheelhouse)"
    src=$(mktemp -d)
    trap 'rm -rf "$src"' EXIT
    "${PIP[@]}" download --no-deps --no-binary :all: -d "$src" "horovod==$HOROVOD_VERSION"
    tar -xzf "$src"/horovod-$HOROVOD_VERSION.tar.gz -C "$src"
    tree="$src/horovod-$HOROVOD_VERSION"
    # The C++17 fix (upstream on master, never released).
    sed -i 's/CMAKE_CXX_STANDARD 14/CMAKE_CXX_STANDARD 17/' "$tree/CMakeLists.txt" "$tree/horovod/torch/CMakeLists.txt"
    grep -q 'CMAKE_CXX_STANDARD 17' "$tree/horovod/torch/CMakeLists.txt"
    # Its CUDA kernels ask for C++11, which CUDA 13's headers (CCCL) no longer accept.
    sed -i 's/CMAKE_CUDA_STANDARD 11/CMAKE_CUDA_STANDARD 17/' "$tree/horovod/common/ops/cuda/CMakeLists.txt"
    # Headers it uses without including them (std::string in group_table.h, std::logic_error in common.h), which a
    # newer libstdc++ than GCC 12's no longer brings in through others: seen on a GPU machine's image, 2026-11-30,
    # where the build passed with these (docs/results/gpu-setup/README.md).
    HVD_INCLUDES="-include cstdint -include string -include stdexcept -include limits -include algorithm -include functional -include memory"
    env CMAKE_POLICY_VERSION_MINIMUM=3.5 CXXFLAGS="${CXXFLAGS:-} $HVD_INCLUDES" \
        HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=${HOROVOD_WITHOUT_MPI:-1} \
        HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_CPU_OPERATIONS=GLOO \
        MAKEFLAGS=${MAKEFLAGS:--j$(nproc)} PATH="$PWD/$VENV/bin:$PATH" \
        "$PY" -m pip --disable-pip-version-check wheel --no-build-isolation --no-deps -w "$wheelhouse" "$tree" \
        > "$BENCH_CACHE/horovod-build.log" 2>&1 \
      || { tail -40 "$BENCH_CACHE/horovod-build.log" >&2; echo "setup: Horovod build failed; full log: $BENCH_CACHE/horovod-build.log" >&2; exit 1; }
  else
    say "using cached Horovod wheel from $wheelhouse"
  fi
  "${PIP[@]}" install --no-deps "$wheelhouse"/horovod-*.whl
fi

say "installing the suite (pip install -e .[dev])"
"${PIP[@]}" install -e ".[dev]"
# The suite's own install must not have replaced torch.
[ "$("$PY" -c 'import torch; print(torch.__version__)')" = "$TORCH_VERSION" ] || { echo "setup: torch changed during install" >&2; exit 1; }

check=$("$VENV/bin/horovodrun" --check-build)
grep -q '\[X\] PyTorch' <<<"$check" && grep -q '\[X\] Gloo' <<<"$check" \
  || { echo "$check" >&2; echo "setup: horovodrun --check-build does not show PyTorch and Gloo" >&2; exit 1; }
if [ "${HOROVOD_GPU_OPERATIONS:-}" = NCCL ]; then
  grep -q '\[X\] NCCL' <<<"$check" || { echo "$check" >&2; echo "setup: horovodrun --check-build does not show NCCL" >&2; exit 1; }
fi
say "ready: torch $TORCH_VERSION, torchvision $("$PY" -c 'import torchvision; print(torchvision.__version__)' 2>/dev/null || echo none), horovod $("$PY" -c 'import horovod; print(horovod.__version__)') (PyTorch + Gloo${HOROVOD_GPU_OPERATIONS:+ + NCCL})"
