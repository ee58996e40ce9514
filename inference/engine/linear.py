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
  can move slightly with its batch mates; fp32 and bf16 rows do not depend on their batch
  mates, only on how many there are (the few-row kernels below).

The RMSNorm scale before a matmul is folded into its weight (W diag(ln), in fp32) for
"packed" and "int8", which have given up bit-parity with HF anyway.

A few rows (the decode step of one or a few streams) may run on a kernel of ours instead,
beside the weights the kind keeps for every other batch (`FewRows`):
- the block kernel (kernels/block_linear.py): the GGUF blocks the weights were
  dequantized from. For "plain" fp32, up to its max_rows rows, with exactly the fp32
  weights (only the order of the sums differs). For bf16 (AVX-512 BF16 and VNNI), up to
  the rows where it ran faster than oneDNN when the model loaded (`rows_faster_on_few`):
  the fp32 weights against the rows quantized to int16 per block of 32, the RMSNorm scale
  applied to the rows instead of the weights: closer to fp32 than the packed bf16 weights;
- else "packed" with the one-row kernel (kernels/row_linear.py): the bf16 weights
  row-major too, for a single row.

Shapes: x [..., K] -> y [..., N]; W [N, K]; halves: W = [W_gate; W_up], each [F, K].
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from .cpu import cpu_has_vnni
from .kernels.block_linear import BlockLinear, Blocks
from .kernels.row_linear import RowLinear

KINDS = ("plain", "packed", "int8")
Norm = Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]  # RMSNorm(x, its scale or None)
# FBGEMM's int8 GEMMs: per-call activation quantization, VNNI where the CPU has it.
INT8_ENGINE = "fbgemm"


class FewRows:
    """A matmul's weights on one of our kernels, for the few rows `takes` accepts."""

    def __init__(self, kernel: RowLinear | BlockLinear, w: torch.Tensor | Blocks, w_up: torch.Tensor | None = None,
                 b: torch.Tensor | None = None, *, halves: bool = False, ln: torch.Tensor | None = None,
                 dtype: torch.dtype = torch.bfloat16):
        """`ln`: for the block kernel, the RMSNorm scale folded into W (fp32), or None;
        `dtype`: the rows' (the block kernel takes fp32 or bf16)."""
        self.kernel, self.w, self.w_up, self.b, self.halves, self.ln = kernel, w, w_up, b, halves, ln
        self.max_rows = 1 if isinstance(kernel, RowLinear) else kernel.max_rows
        self.bound = kernel.bind(w, b, ln, dtype=dtype) if isinstance(kernel, BlockLinear) else None

    def takes(self, x: torch.Tensor, halves: bool = False) -> bool:
        return halves == self.halves and x.numel() <= self.max_rows * x.shape[-1]

    @property
    def norms(self) -> bool:
        """The kernel runs the RMSNorm before this matmul itself (the block kernel's bf16 rows,
        where the norm's scale was folded in)."""
        return self.ln is not None

    def linear(self, x: torch.Tensor, residual: torch.Tensor | None = None,
               norm_eps: float | None = None) -> torch.Tensor:
        if self.bound is None:
            return self.kernel.linear(self.w, self.b, x, residual)  # type: ignore[arg-type]
        return self.bound.linear(x, residual, norm_eps)

    def swiglu(self, x: torch.Tensor, norm_eps: float | None = None) -> torch.Tensor:
        if self.bound is None:
            return self.kernel.swiglu(self.w, self.w_up, x)  # type: ignore[call-arg, arg-type]
        return self.bound.swiglu(x, norm_eps)


class Linear:
    def __init__(self, kind: str, w, b: torch.Tensor | None, w_up=None, *, reduce_range: bool = False,
                 few: FewRows | None = None, in_features: int = 0):
        self.kind = kind
        self.in_features = in_features  # K
        self.w, self.b, self.w_up = w, b, w_up  # packed / prepacked objects for packed, int8
        self.reduce_range = reduce_range
        self.few = few

    @classmethod
    def build(cls, w: torch.Tensor, b: torch.Tensor | None = None, ln: torch.Tensor | None = None, *,
              device: torch.device, dtype: torch.dtype, kind: str, halves: bool = False,
              row_kernel: RowLinear | None = None, block_kernel: BlockLinear | None = None,
              blocks: Blocks | None = None) -> Linear:
        """`ln`: an RMSNorm scale to fold in, W diag(ln) (computed in fp32, then cast).
        `row_kernel`: for "packed", the kernel a single row runs on (where it fits W).
        `block_kernel`, `blocks`: for "plain" or "packed" on a CPU model of the dtypes the
        kernel takes (the caller's to decide), the kernel and W's GGUF blocks for a few rows;
        they replace the row kernel."""
        w = w.detach().float()
        fold = None if ln is None else ln.detach().float().contiguous()
        if fold is not None:
            w = w * fold[None, :]
        if kind == "int8":
            bias = None if b is None else b.detach().float().contiguous()
            # Without VNNI, FBGEMM's AVX2 path sums u8 x s8 pairs in int16: 7-bit activations.
            return cls(kind, _prepack_int8(w, bias), None, reduce_range=not cpu_has_vnni(), in_features=w.shape[1])
        b = None if b is None else b.detach().to(device=device, dtype=dtype)
        w = w.to(device=device, dtype=dtype).contiguous()
        few = None
        if block_kernel is not None and blocks is not None and (blocks.n, blocks.k) == tuple(w.shape) \
                and (fold is None or dtype == torch.bfloat16):
            few = FewRows(block_kernel, block_kernel.prepare(blocks, dtype), b=b, halves=halves, ln=fold, dtype=dtype)
        use_row = few is None and kind == "packed" and row_kernel is not None and row_kernel.fits(w)
        if kind == "packed" and halves:  # SwiGLU: gate and up as two packed matmuls with post-ops
            gate, up = (t.contiguous() for t in w.chunk(2, dim=0))
            return cls(kind, _pack(gate), b, _pack(up), few=FewRows(row_kernel, gate, up, b, halves=True) if use_row else few,
                       in_features=w.shape[1])
        if use_row:
            few = FewRows(row_kernel, w, b=b)
        return cls(kind, _pack(w) if kind == "packed" else w, b, few=few, in_features=w.shape[1])

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.few is not None and self.few.takes(x):
            return self.few.linear(x)
        return self.own(x)

    def normed(self, x: torch.Tensor, norm: Norm, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
        """self(norm(x, weight)), `norm` the RMSNorm (of `eps`) before this matmul; inside the
        kernel where it takes x (one op for the norm's several) and holds the norm's scale."""
        if self.few is not None and self.few.norms and self.few.takes(x):
            return self.few.linear(x, norm_eps=eps)
        return self(norm(x, weight))

    def normed_swiglu(self, x: torch.Tensor, norm: Norm, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
        """self.swiglu(norm(x, weight)), as `normed`."""
        if self.few is not None and self.few.norms and self.few.takes(x, halves=True):
            return self.few.swiglu(x, norm_eps=eps)
        return self.swiglu(norm(x, weight))

    def own(self, x: torch.Tensor) -> torch.Tensor:
        """x W^T (+ b) on the kind's own weights, whatever the rows."""
        if self.kind == "int8":
            return torch.ops.quantized.linear_dynamic(x, self.w, self.reduce_range)
        if self.kind == "packed":
            return torch.ops.mkldnn._linear_pointwise(x, self.w, self.b, "none", [], "")
        return F.linear(x, self.w, self.b)

    def add(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """residual + x W^T (+ b)."""
        if self.few is not None and self.few.takes(x):
            return self.few.linear(x, residual)
        if self.kind == "packed":
            return torch.ops.mkldnn._linear_pointwise.binary(x, residual, self.w, self.b, "add")
        if self.kind == "int8":
            return self(x).add_(residual)  # the fresh output takes the sum: no extra tensor
        return residual + F.linear(x, self.w, self.b)

    def swiglu(self, x: torch.Tensor) -> torch.Tensor:
        """silu(x W_gate^T) * x W_up^T."""
        if self.few is not None and self.few.takes(x, halves=True):
            return self.few.swiglu(x)
        return self.own_swiglu(x)

    def own_swiglu(self, x: torch.Tensor) -> torch.Tensor:
        """swiglu on the kind's own weights, whatever the rows."""
        if self.w_up is not None:
            gate = torch.ops.mkldnn._linear_pointwise(x, self.w, None, "swish", [], "")
            return torch.ops.mkldnn._linear_pointwise.binary(x, gate, self.w_up, None, "mul")
        gate, up = self.own(x).chunk(2, dim=-1)
        return F.silu(gate) * up


def mlp(gate_up: Linear, down: Linear, x: torch.Tensor, norm: Norm, weight: torch.Tensor | None,
        eps: float) -> torch.Tensor:
    """x + down(swiglu(norm(x, weight))): a layer's MLP after its residual stream x; one
    kernel call for both matmuls where the block kernel takes x in both."""
    g, dn = gate_up.few, down.few
    if g is not None and dn is not None and g.bound is not None and dn.bound is not None and g.norms \
            and dn.b is None and g.takes(x, halves=True) and dn.takes(x):
        return g.bound.mlp(dn.bound, x, eps)
    return down.add(gate_up.normed_swiglu(x, norm, weight, eps), x)


def rows_faster_on_few(linears: list[Linear], dtype: torch.dtype, cap: int, rounds: int = 3,
                       budget_s: float = 3.0) -> int:
    """The most rows m <= cap of `dtype` such that a pass over `linears` (a forward's matmuls,
    in order) on their few-row kernels ran faster than on their own weights at every row
    count up to m, timed here (best of `rounds`, interleaved); 0 if not at one. Where the
    blocks beat oneDNN's packed bf16 depends on the machine's read bandwidth against its
    arithmetic, so it is measured, not assumed; a whole pass, because one matrix timed
    again and again sits in a large cache that a forward's weights do not. Past `budget_s`
    (a slow machine) no more rows are tried."""
    linears = [lin for lin in linears if lin.few is not None]
    if not linears:
        return 0
    rows, began = 0, time.perf_counter()
    with torch.inference_mode():
        for m in range(1, cap + 1):
            if time.perf_counter() - began > budget_s:
                break
            xs = {k: torch.randn(m, k).to(dtype) for k in {lin.in_features for lin in linears}}
            best = {True: float("inf"), False: float("inf")}
            for r in range(rounds + 1):  # the first round warms both (pages, thread pools): untimed
                for on_few in best:
                    start = time.perf_counter()
                    _pass(linears, xs, on_few)
                    if r:
                        best[on_few] = min(best[on_few], time.perf_counter() - start)
            if best[True] >= best[False]:
                break
            rows = m
    return rows


def _pass(linears: list[Linear], xs: dict[int, torch.Tensor], on_few: bool) -> None:
    for lin in linears:
        x, few = xs[lin.in_features], lin.few
        assert few is not None
        if on_few:
            few.swiglu(x) if few.halves else few.linear(x)
        else:
            lin.own_swiglu(x) if few.halves else lin.own(x)


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
