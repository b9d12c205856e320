"""PyTorch DistributedDataParallel: the reference a user would pick instead of Horovod.

References:
    Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel Training",
    VLDB 2020.

Update rule: identical to ``sync`` (θ ← Opt(θ, mean_k ∇L(θ; B_k))), but gradients are
bucketed and allreduced by torch.distributed (gloo on CPU, NCCL on GPU) during backward.
The process group is initialised from Horovod's rank and size inside the same horovodrun job.
``comm_s`` is not separable here (DDP overlaps it inside backward) and is recorded as 0.
"""

from __future__ import annotations

from torch.nn.parallel import DistributedDataParallel

from .base import Algorithm, StepStats


class DDP(Algorithm):
    name = "ddp"
    paper = "PyTorch DistributedDataParallel (Li et al., VLDB 2020)"

    def setup(self, model, optimizer):
        super().setup(model, optimizer)
        self.comm.init_torch_distributed()  # comm: torch.distributed group from Horovod's rank/size
        dev = self.ctx.device
        self.ddp = DistributedDataParallel(model, device_ids=[dev.index] if dev.type == "cuda" else None)  # comm: broadcasts rank 0's parameters
        self.comm.broadcast_optimizer_state(optimizer, root=0)  # comm:

    def step(self, x, y) -> StepStats:
        stats = self.forward_backward(x, y, model=self.ddp)  # comm: bucketed allreduce inside backward
        self.optimizer.step()
        stats.bytes_sent = self.param_bytes(grads=True)
        return stats
