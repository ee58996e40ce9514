"""The one-row bf16 matmul kernel (inference/engine/kernels/row_linear.c) against the
oneDNN-packed path it stands in for, post-ops included; and where it does not apply."""

from __future__ import annotations

import pytest
import torch

from inference.engine.kernels import row_linear
from inference.engine.linear import Linear, can_pack

from .conftest import torch_threads

CPU = torch.device("cpu")

pytestmark = pytest.mark.skipif(not can_pack(CPU, torch.bfloat16), reason="no native bf16 matmuls on this CPU")


@pytest.fixture(scope="module")
def kernel():
    k = row_linear.load()
    if k is None:
        pytest.skip("this CPU has no AVX512-BF16: the one-row kernel does not run here")
    return k


def pair(kernel, w, b=None, halves=False):
    """The same weights as a packed Linear on oneDNN alone and one with the row kernel."""
    make = dict(device=CPU, dtype=torch.bfloat16, kind="packed", halves=halves)
    return Linear.build(w, b, **make), Linear.build(w, b, **make, row_kernel=kernel)


def close_in_bf16(got, expected):
    # Both accumulate in fp32 and round once; the sums' order differs, so the roundings
    # may land one bf16 step apart.
    torch.testing.assert_close(got.float(), expected.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("n, k", [(960, 576), (576, 1536), (101, 64), (7, 32)])
def test_one_row_equals_onednn_with_bias_and_residual(kernel, n, k):
    torch.manual_seed(n + k)
    w, b = torch.randn(n, k) * 0.05, torch.randn(n) * 0.1
    x = torch.randn(1, 1, k).bfloat16()
    residual = torch.randn(1, 1, n).bfloat16()
    onednn, ours = pair(kernel, w, b)
    assert ours.few is not None
    close_in_bf16(ours(x), onednn(x))
    close_in_bf16(ours.add(x, residual), onednn.add(x, residual))


def test_swiglu_on_one_row_equals_onednn(kernel):
    torch.manual_seed(1)
    w = torch.randn(2 * 1536, 576) * 0.05
    x = torch.randn(1, 1, 576).bfloat16()
    onednn, ours = pair(kernel, w, halves=True)
    close_in_bf16(ours.swiglu(x), onednn.swiglu(x))


@pytest.mark.parametrize("n", [517, 2 * row_linear.MIN_FEATURES_PER_THREAD + 5])
@pytest.mark.parametrize("halves", [False, True])
def test_outputs_split_across_threads_equal_one_thread(kernel, n, halves):
    """The OpenMP build splits every call's output rows across torch's threads, a small
    layer's too: each output is one thread's whole sum, so two threads give one's bits."""
    assert kernel.parallel, "the kernel was built without OpenMP"
    torch.manual_seed(2)
    _, ours = pair(kernel, torch.randn(2 * n if halves else n, 576) * 0.05, halves=halves)
    x = torch.randn(1, 576).bfloat16()
    outs = []
    for threads in (1, 2):
        with torch_threads(threads):
            outs.append(ours.swiglu(x) if halves else ours(x))
    assert torch.equal(outs[0], outs[1])


def test_more_rows_or_an_odd_width_stay_on_onednn(kernel):
    torch.manual_seed(3)
    onednn, ours = pair(kernel, torch.randn(64, 576) * 0.05)
    assert ours.few.takes(torch.randn(1, 1, 576)) and not ours.few.takes(torch.randn(2, 1, 576))
    x = torch.randn(2, 576).bfloat16()  # two rows: exactly oneDNN's result
    assert torch.equal(ours(x), onednn(x))
    _, odd = pair(kernel, torch.randn(64, 48) * 0.05)  # K = 48, not a multiple of 32
    assert odd.few is None
