#!/bin/bash
# One device check: build Horovod 0.28.1 with NCCL against the image's CUDA torch, check-build, the GPU tests.
# Run from the repository root, with .whl/ holding horovod-0.28.1.tar.gz and cp312 wheels of cffi and pycparser
# (pip download here), and OUT naming a folder for its logs. Kept as it ran on 2026-11-30 (docs/results/gpu-setup/).
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
REPO=$PWD; SITE=/tmp/site; mkdir -p $SITE $OUT
exec > >(tee $OUT/gpu-check.log) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc
python3 -c "import torch, torchvision, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torchvision.__version__, torch.cuda.is_available(), torch.cuda.nccl.version())"
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null | head -1); echo "nvcc: $NVCC"; $NVCC --version | tail -2
CUDA_HOME=$(dirname $(dirname $(readlink -f $NVCC)))
N=$(python3 -c "import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])"); echo "nccl: $N"; ls $N $N/lib
mkdir -p /tmp/nccl/lib; ln -sfn $N/include /tmp/nccl/include; for f in $N/lib/libnccl.so*; do ln -sf $f /tmp/nccl/lib/; done; ln -sf $N/lib/libnccl.so.2 /tmp/nccl/lib/libnccl.so
python3 -m pip install -q --no-index --no-deps --no-cache-dir .whl/cffi-*.whl .whl/pycparser-*.whl
tar -xzf .whl/horovod-0.28.1.tar.gz -C /tmp; T=/tmp/horovod-0.28.1
sed -i 's/CMAKE_CXX_STANDARD 14/CMAKE_CXX_STANDARD 17/' $T/CMakeLists.txt $T/horovod/torch/CMakeLists.txt
sed -i 's/CMAKE_CUDA_STANDARD 11/CMAKE_CUDA_STANDARD 17/' $T/horovod/common/ops/cuda/CMakeLists.txt
sed -i '0,/#include/s//#include <string>\n#include <cstdint>\n#include/' $T/horovod/common/group_table.h; head -40 $T/horovod/common/group_table.h | grep -n include
export CXXFLAGS='-include cstdint -include string -include stdexcept -include limits -include algorithm -include functional -include memory'
SECONDS=0
env CMAKE_POLICY_VERSION_MINIMUM=3.5 HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
  HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_CPU_OPERATIONS=GLOO HOROVOD_GPU_OPERATIONS=NCCL \
  HOROVOD_CUDA_HOME=$CUDA_HOME CUDA_HOME=$CUDA_HOME HOROVOD_NCCL_HOME=/tmp/nccl HOROVOD_NCCL_LINK=SHARED \
  HOROVOD_BUILD_CUDA_CC_LIST=90 MAKEFLAGS=-j16 \
  python3 -m pip install -q --no-build-isolation --no-deps --no-cache-dir $T > $OUT/horovod-build.log 2>&1
rc=$?; echo "horovod build rc=$rc in ${SECONDS}s"; [ $rc = 0 ] || { tail -60 $OUT/horovod-build.log; exit 1; }
export PYTHONPATH=$REPO; which horovodrun
horovodrun --check-build
cd $REPO
timeout 240 python3 -m pytest -q -rs -p no:cacheprovider -o addopts= -m gpu tests/parallel/test_gpu.py 2>&1 | tail -30
date -u
