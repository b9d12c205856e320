"""Model builders: small models written here, large ones from torchvision when it is installed.

- ``mlp``: input -> ``hidden`` widths (ReLU) -> classes.
- ``hermans_mlp``: 784-1000-2000-1000-10, the model of Hermans (2017), "On Scalable Deep Learning
  and Parallelizing Gradient Descent", used for his DOWNPOUR / AGN / ADAG / EASGD experiments.
- ``lenet``: a LeNet-5-style CNN (LeCun et al. 1998) for 1- or 3-channel images of any size >= 8.
- ``cnn_bn``: a small CNN with BatchNorm (two conv-BN-ReLU-pool blocks, one linear layer), the smallest
  model whose evaluation needs the running statistics (buffers) and not only the parameters.
- ``transformer``: a decoder-only byte-level language model (GPT-2-style pre-LayerNorm blocks of causal
  self-attention and MLP, learned position embeddings, no dropout, no BatchNorm) for ``pydoc_topics``.
- ``alexnet``, ``googlenet', ``resnet18``, ``resnet50``: torchvision's, randomly initialised.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from . import BenchError
from .config import TrainConfig

TORCHVISION_MODELS = ("alexnet", "googlenet", "resnet18", "resnet50")


def mlp(in_features: int, hidden: list[int], num_classes: int) -> nn.Module:
    layers: list[nn.Module] = [nn.Flatten()]
    width = in_features
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, num_classes))
    return nn.Sequential(*layers)


class LeNet(nn.Module):
    def __init__(self, channels: int, side: int, num_classes: int):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(channels, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2))
        s = side // 4
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(16 * s * s, 120), nn.ReLU(),
                                        nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, num_classes))

    def forward(self, x):
        return self.classifier(self.features(x))


def cnn_bn(channels: int, num_classes: int) -> nn.Module:
    def block(c_in: int, c_out: int) -> list[nn.Module]:
        return [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(), nn.MaxPool2d(2)]

    return nn.Sequential(*block(channels, 8), *block(8, 16), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                         nn.Linear(16 * 4, num_classes))


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which position i attends to positions <= i only."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, h):
        b, t, c = h.shape
        q, k, v = self.qkv(h).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(width), CausalSelfAttention(width, heads)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, h):
        h = h + self.attn(self.ln1(h))
        return h + self.mlp(self.ln2(h))


class ByteTransformer(nn.Module):
    """Bytes (batch, T) in, T <= ``seq_len``; next-byte logits out as (batch, vocab, T): the class dimension second,
    PyTorch's layout for per-position targets (``cross_entropy``'s (N, C, d) form), so that the suite's loss and its
    accuracy, ``out.argmax(1) == y``, count every position of every window unchanged. Weights initialised as GPT-2's
    (normal, std 0.02; the residual projections' std divided by sqrt(2 x layers); zero biases)."""

    def __init__(self, vocab: int, seq_len: int, layers: int, width: int, heads: int):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(seq_len, width)
        self.blocks = nn.Sequential(*(Block(width, heads) for _ in range(layers)))
        self.ln, self.head = nn.LayerNorm(width), nn.Linear(width, vocab)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                residual = name.endswith(("attn.proj.weight", "mlp.2.weight"))
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * layers) if residual else 0.02)

    def forward(self, x):
        h = self.tok(x) + self.pos.weight[:x.shape[1]]
        return self.head(self.ln(self.blocks(h))).transpose(1, 2)


def _torchvision(name: str, num_classes: int) -> nn.Module:
    try:
        import torchvision.models as tvm
    except Exception as e:  # not installed, or a build that does not match torch
        raise BenchError(f"model {name!r} needs torchvision, which does not import here ({type(e).__name__}: {e}); "
                         f"install a torchvision that matches your torch, or pick mlp, hermans_mlp or lenet") from None
    if name == "googlenet":
        return tvm.googlenet(weights=None, num_classes=num_classes, aux_logits=False, init_weights=True)
    return getattr(tvm, name)(weights=None, num_classes=num_classes)


def build_model(cfg: TrainConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Build the configured model; parameters are initialised from ``cfg.seed`` (same on every rank)."""
    torch.manual_seed(cfg.seed)
    features = math.prod(input_shape)
    if cfg.model == "mlp":
        return mlp(features, cfg.hidden, num_classes)
    if cfg.model == "hermans_mlp":
        return mlp(features, [1000, 2000, 1000], num_classes)
    if cfg.model == "lenet":
        if len(input_shape) != 3 or input_shape[1] != input_shape[2] or input_shape[1] < 8:
            raise BenchError(f"lenet needs square images (C, H, H) with H >= 8, got input shape {input_shape}")
        return LeNet(input_shape[0], input_shape[1], num_classes)
    if cfg.model == "cnn_bn":
        if len(input_shape) != 3 or min(input_shape[1:]) < 4:
            raise BenchError(f"cnn_bn needs images (C, H, W) with H, W >= 4, got input shape {input_shape}")
        return cnn_bn(input_shape[0], num_classes)
    if cfg.model == "transformer":
        if input_shape != (cfg.seq_len,):
            raise BenchError(f"transformer needs byte windows of seq_len {cfg.seq_len}, got input shape {input_shape}")
        return ByteTransformer(num_classes, cfg.seq_len, cfg.layers, cfg.width, cfg.heads)
    if cfg.model in TORCHVISION_MODELS:
        if len(input_shape) != 3 or input_shape[0] != 3:
            raise BenchError(f"{cfg.model} needs 3-channel images, got input shape {input_shape}")
        return _torchvision(cfg.model, num_classes)
    raise BenchError(f"unknown model {cfg.model!r}; valid: alexnet, cnn_bn, googlenet, hermans_mlp, lenet, mlp, resnet18, "
                     f"resnet50, transformer")


REAL_FORWARD_PARAMS = 16_000_000
"""Models up to this many parameters (64 MB of float32 weights) are measured by a real forward pass of one sample on
the CPU, in evaluation mode and without gradients (milliseconds); larger ones on PyTorch's meta device, whose first
use imports its shape functions (about 2 s of a launch on 2 cores, measured 2026-11-29)."""


def footprint(cfg: TrainConfig, input_shape: tuple[int, ...], num_classes: int,
              real_up_to: int = REAL_FORWARD_PARAMS) -> tuple[int, int]:
    """(parameters, activation values per sample) of the configured model: the outputs of every module of one forward
    pass of one sample. The model is built on PyTorch's meta device (shapes only: nothing allocated) to count its
    parameters; one of at most ``real_up_to`` parameters is then built on the CPU and run (same shapes, see
    :data:`REAL_FORWARD_PARAMS`), a larger one runs on the meta device. Activations are 0 where a model's forward runs
    on neither."""
    with torch.device("meta"):
        meta = build_model(cfg, input_shape, num_classes)
    params = sum(p.numel() for p in meta.parameters())
    if params <= real_up_to:
        activations = _outputs(build_model(cfg, input_shape, num_classes).eval(), cfg, input_shape, "cpu")
        if activations is not None:
            return params, activations
    with torch.device("meta"):
        activations = _outputs(meta, cfg, input_shape, "meta")
    return params, activations or 0


def _outputs(model: nn.Module, cfg: TrainConfig, input_shape: tuple[int, ...], device: str) -> int | None:
    """Values output by ``model``'s modules in one forward pass of one sample on ``device``; None where it fails."""
    outputs = [0]

    def count(module, args, out):
        outputs[0] += sum(t.numel() for t in (out if isinstance(out, (tuple, list)) else [out])
                          if isinstance(t, torch.Tensor))

    hooks = [m.register_forward_hook(count) for m in model.modules()]
    x = torch.zeros((1, *input_shape), dtype=torch.long if cfg.model == "transformer" else torch.float32,
                    device=device)
    try:
        with torch.no_grad():
            model(x)
    except Exception:  # an operation without a kernel on this device
        return None
    finally:
        for h in hooks:
            h.remove()
    return outputs[0]


def make_optimizer(cfg: TrainConfig, tensors) -> torch.optim.Optimizer:
    """The configured optimizer over ``tensors`` (model tensors, e.g. ``model.parameters()``)."""
    if cfg.optimizer == "adam":
        return torch.optim.Adam(tensors, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return torch.optim.SGD(tensors, lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.nesterov,
                           weight_decay=cfg.weight_decay)
