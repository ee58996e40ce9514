"""The decoder's linear layers: y = x W^T (+ b), and the fused forms a layer needs
(residual add, SwiGLU), each on the kernel that runs this machine fastest.

Three kinds, chosen once per model (probed at run time, never assumed):
- "plain": F.linear in the model's dtype (fp32 anywhere, bf16/fp16 on a GPU). fp32 keeps
  Hugging Face's numerics, so greedy output matches HF token for token.
- "packed": bf16 on a CPU with native bf16 units. Weights are packed once for oneDNN
  (which would otherwise re-lay them out on every call) and the residual add, SiLU and
  gating run as the matmul's post-ops (the private ops inductor's CPU freezing uses).
- "int8": per-output-channel symmetric int8 weights and dynamic activation scales,
  through torch's quantized dynamic linear (`torch.ops.quantized.linear_dynamic`: FBGEMM,
  whose AVX-512 VNNI kernels do the u8 x s8 products). It takes and returns fp32: the
  activations, norms, attention and KV cache of an int8 model are fp32, only the weights
  (and the bytes read per step) shrink. The activation scale is one per call (per tensor:
  every row of the batch shares it, as FBGEMM computes it), so an int8 sequence's logits
  can move slightly with its batch mates; fp32 and bf16 rows are batch-independent.

The RMSNorm scale before a matmul is folded into its weight (W diag(ln), in fp32) for
"packed" and "int8", which have given up bit-parity with HF anyway.

A "packed" Linear given the one-row kernel (kernels/row_linear.py) keeps its weights
row-major too and runs a single row (one decode stream) on that kernel instead.

Shapes: x [..., K] -> y [..., N]; W [N, K]; halves: W = [W_gate; W_up], each [F, K].
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from .cpu import cpu_has_vnni
from .kernels.row_linear import RowLinear

KINDS = ("plain", "packed", "int8")
# FBGEMM's int8 GEMMs: per-call activation quantization, VNNI where the CPU has it.
INT8_ENGINE = "fbgemm"


class Linear:
    def __init__(self, kind: str, w, b: torch.Tensor | None, w_up=None, *, reduce_range: bool = False,
                 row: tuple[RowLinear, torch.Tensor, torch.Tensor | None] | None = None):
        self.kind = kind
        self.w, self.b, self.w_up = w, b, w_up  # packed / prepacked objects for packed, int8
        self.reduce_range = reduce_range
        self.row = row  # the one-row kernel and its row-major weights (gate, up for halves)

    @classmethod
    def build(cls, w: torch.Tensor, b: torch.Tensor | None = None, ln: torch.Tensor | None = None, *,
              device: torch.device, dtype: torch.dtype, kind: str, halves: bool = False,
              row_kernel: RowLinear | None = None) -> Linear:
        """`ln`: an RMSNorm scale to fold in, W diag(ln) (computed in fp32, then cast).
        `row_kernel`: for "packed", the kernel a single row runs on (where it fits W)."""
        w = w.detach().float()
        if ln is not None:
            w = w * ln.detach().float()[None, :]
        if kind == "int8":
            bias = None if b is None else b.detach().float().contiguous()
            # Without VNNI, FBGEMM's AVX2 path sums u8 x s8 pairs in int16: 7-bit activations.
            return cls(kind, _prepack_int8(w, bias), None, reduce_range=not cpu_has_vnni())
        b = None if b is None else b.detach().to(device=device, dtype=dtype)
        w = w.to(device=device, dtype=dtype).contiguous()
        use_row = kind == "packed" and row_kernel is not None and row_kernel.fits(w)
        if kind == "packed" and halves:  # SwiGLU: gate and up as two packed matmuls with post-ops
            gate, up = (t.contiguous() for t in w.chunk(2, dim=0))
            return cls(kind, _pack(gate), b, _pack(up), row=(row_kernel, gate, up) if use_row else None)
        return cls(kind, _pack(w) if kind == "packed" else w, b, row=(row_kernel, w, None) if use_row else None)

    def _one_row(self, x: torch.Tensor, halves: bool = False) -> bool:
        return self.row is not None and (self.row[2] is not None) == halves and x.numel() == x.shape[-1]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self._one_row(x):
            return self.row[0].linear(self.row[1], self.b, x)
        if self.kind == "int8":
            return torch.ops.quantized.linear_dynamic(x, self.w, self.reduce_range)
        if self.kind == "packed":
            return torch.ops.mkldnn._linear_pointwise(x, self.w, self.b, "none", [], "")
        return F.linear(x, self.w, self.b)

    def add(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """residual + x W^T (+ b)."""
        if self._one_row(x):
            return self.row[0].linear(self.row[1], self.b, x, residual)
        if self.kind == "packed":
            return torch.ops.mkldnn._linear_pointwise.binary(x, residual, self.w, self.b, "add")
        if self.kind == "int8":
            return self(x).add_(residual)  # the fresh output takes the sum: no extra tensor
        return residual + F.linear(x, self.w, self.b)

    def swiglu(self, x: torch.Tensor) -> torch.Tensor:
        """silu(x W_gate^T) * x W_up^T."""
        if self._one_row(x, halves=True):
            return self.row[0].swiglu(self.row[1], self.row[2], x)
        if self.w_up is not None:
            gate = torch.ops.mkldnn._linear_pointwise(x, self.w, None, "swish", [], "")
            return torch.ops.mkldnn._linear_pointwise.binary(x, gate, self.w_up, None, "mul")
        gate, up = self(x).chunk(2, dim=-1)
        return F.silu(gate) * up


def choose_kind(device: torch.device, dtype: torch.dtype, weights: str) -> str:
    """The kind of every matmul of a model: weights "int8" or "native" (the dtype's own)."""
    if weights == "int8":
        if not can_int8(device):
            raise RuntimeError("int8 weights need a CPU and torch's quantized FBGEMM engine")
        return "int8"
    return "packed" if can_pack(device, dtype) else "plain"


def can_pack(device: torch.device, dtype: torch.dtype) -> bool:
    if device.type != "cpu" or dtype != torch.bfloat16:
        return False
    try:  # private oneDNN ops (those inductor's CPU freezing uses): probe, never assume
        w = _pack(torch.ones(8, 8, dtype=dtype))
        out = torch.ops.mkldnn._linear_pointwise(torch.ones(2, 8, dtype=dtype), w, None, "none", [], "")
        return bool(torch.equal(out, torch.full((2, 8), 8.0, dtype=dtype)))
    except (AttributeError, RuntimeError):
        return False


def can_int8(device: torch.device | str = "cpu") -> bool:
    """torch's quantized dynamic linear works here (a CPU, FBGEMM built in, ops present)."""
    if torch.device(device).type != "cpu" or INT8_ENGINE not in torch.backends.quantized.supported_engines:
        return False
    try:
        w = torch.eye(16)
        y = torch.ops.quantized.linear_dynamic(torch.ones(2, 16), _prepack_int8(w, None), True)
        return bool(torch.allclose(y, torch.ones(2, 16), atol=0.05))
    except (AttributeError, RuntimeError):
        return False


def _pack(w: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(w, 64)  # laid out for batches near 64


@contextmanager
def _quantized_engine(name: str):
    before = torch.backends.quantized.engine
    torch.backends.quantized.engine = name
    try:
        yield
    finally:
        torch.backends.quantized.engine = before


def _prepack_int8(w: torch.Tensor, b: torch.Tensor | None):
    """W [N, K] fp32 -> FBGEMM's packed int8 weight: one scale per output channel,
    max|W_n| / 127, zero point 0 (symmetric)."""
    scale = (w.abs().amax(dim=1) / 127.0).clamp_min(1e-12).double()
    zero = torch.zeros(w.shape[0], dtype=torch.long)
    with warnings.catch_warnings():  # torch marks quantized tensors for a future removal
        warnings.simplefilter("ignore", UserWarning)
        qw = torch.quantize_per_channel(w.contiguous(), scale, zero, 0, torch.qint8)
        with _quantized_engine(INT8_ENGINE):
            return torch.ops.quantized.linear_prepack(qw, b)
