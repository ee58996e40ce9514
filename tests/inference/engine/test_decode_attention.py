"""The decode attention kernel (inference/engine/kernels): the same attention as a plain
fp32 reference over each row's visible positions, for every path the C code has (the
AVX512-BF16 one for D = 64 where the CPU has it, the generic loops otherwise), never
reading past a row's length; and a model on torch's SDPA (the fallback) still greedy-equal
to Hugging Face."""

from __future__ import annotations

import pytest
import torch

from inference.engine.decode import DecodeEngine
from inference.engine.kernels import build as kernel_build
from inference.engine.kernels import decode_attention
from inference.engine.loader import load_model
from inference.engine.model import CacheGroup
from inference.engine.prefill import PrefillEngine

from .conftest import PROMPTS, decode_request, prefill_one, tiny_config


@pytest.fixture(scope="module")
def kernel():
    k = decode_attention.load()
    assert k is not None, "the kernel must build on a machine with a C compiler"
    return k


def reference(q, kv, lens, scale):
    """softmax(q K^T scale) V per row over positions [0, len), in fp32."""
    n, hkv, g, d = q.shape
    out = torch.empty(n, hkv, g, d)
    for b in range(n):
        k = kv[b, :hkv, : lens[b]].float()  # [Hkv, t, D]
        v = kv[b, hkv:, : lens[b]].float()
        w = torch.softmax(q[b].float() @ k.transpose(1, 2) * scale, dim=-1)  # [Hkv, G, t]
        out[b] = w @ v
    return out


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("hkv, g, d", [(3, 3, 64), (2, 1, 64), (2, 4, 32), (1, 2, 128)])
def test_kernel_equals_reference_and_never_reads_past_a_row(kernel, dtype, hkv, g, d):
    torch.manual_seed(hkv * 100 + g * 10 + d)
    n, capacity = 7, 96
    heads = hkv * g
    qkv = torch.randn(n, 1, heads + 2 * hkv, d).to(dtype)  # as the forward lays q out
    q = qkv[:, 0, :heads].view(n, hkv, g, d)
    kv = torch.randn(n, 2 * hkv, capacity, d).to(dtype)
    lens = torch.tensor([1, 2, 17, 50, 95, 96, 33])
    for b in range(n):  # whatever lies beyond a row's length must not reach its output
        kv[b, :, lens[b]:] = float("nan")
    out = torch.empty(n, hkv, g, d, dtype=dtype)
    kernel(q, kv, lens, out, d**-0.5)
    expected = reference(q, kv, lens, d**-0.5)
    assert torch.isfinite(out).all()
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(out.float(), expected, rtol=tol, atol=tol)


def test_rows_split_across_threads_equal_one_thread(kernel):
    torch.manual_seed(3)
    n, hkv, g, d = 24, 3, 3, 64
    q = torch.randn(n, hkv, g, d).bfloat16()
    kv = torch.randn(n, 2 * hkv, 64, d).bfloat16()
    lens = torch.randint(1, 65, (n,))
    outs = []
    before = torch.get_num_threads()
    try:
        for threads in (1, 3):
            torch.set_num_threads(threads)
            out = torch.empty(n, hkv, g, d, dtype=torch.bfloat16)
            kernel(q, kv, lens, out, 0.125)
            outs.append(out)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(outs[0], outs[1])


def test_kernel_refuses_a_layout_it_cannot_read(kernel):
    q = torch.randn(2, 3, 64, 3).transpose(2, 3)  # D not innermost
    kv = torch.randn(2, 6, 8, 64)
    with pytest.raises(ValueError, match="layout"):
        kernel(q, kv, torch.tensor([1, 2]), torch.empty(2, 3, 3, 64), 0.125)


def test_without_a_compiler_the_kernel_is_unavailable(monkeypatch, tmp_path):
    monkeypatch.setenv("TANDEM_KERNEL_DIR", str(tmp_path))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(kernel_build.KernelUnavailable):
        kernel_build.build(decode_attention.SOURCE)


def test_decode_forward_on_the_kernel_matches_sdpa(tiny_dir):
    on_kernel = load_model(tiny_config(tiny_dir, attention="kernel")).model
    on_sdpa = load_model(tiny_config(tiny_dir, attention="sdpa")).model
    assert on_kernel.decode_attention is not None and on_sdpa.decode_attention is None
    torch.manual_seed(0)
    lens = [5, 40, 77]
    rows = len(lens)
    cache = on_kernel.new_kv(rows, 128)
    cache.normal_()
    ids = torch.randint(3, 500, (rows, 1))
    pos = torch.tensor(lens)[:, None]
    logits = [m.forward(ids, pos, [CacheGroup(cache.clone(), 0, max(lens) + 1)], torch.zeros(rows, dtype=torch.long))
              for m in (on_kernel, on_sdpa)]
    torch.testing.assert_close(logits[0], logits[1], rtol=1e-4, atol=1e-4)


def test_a_model_on_sdpa_is_still_greedy_equal_to_hf(tiny_dir, tiny_reference):
    config = tiny_config(tiny_dir, attention="sdpa")
    loaded = load_model(config)
    prefill, decode = PrefillEngine(loaded, config), DecodeEngine(loaded, config)
    try:
        for i in (0, 6, 9):
            first = prefill_one(prefill, f"r{i}", PROMPTS[i])
            tokens, _ = decode.submit(decode_request(first, PROMPTS[i])).result(timeout=60)
            assert [first.first_token, *tokens] == tiny_reference(PROMPTS[i]), f"prompt {i}"
    finally:
        decode.shutdown()
