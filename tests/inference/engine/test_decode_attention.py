"""The decode attention kernel (inference/engine/kernels): the same attention as a plain
fp32 reference over each row's visible positions, for every path the C code has (the
AVX512-BF16 one for D = 64 where the CPU has it, the generic loops otherwise), never
reading past a row's length; and a model on torch's SDPA (the fallback) still greedy-equal
to Hugging Face."""

from __future__ import annotations

import pytest
import torch

from inference.engine.decode import DecodeEngine
from inference.engine.kernels import decode_attention
from inference.engine.loader import load_model
from inference.engine.model import CacheGroup
from inference.engine.prefill import PrefillEngine

from .conftest import PROMPTS, decode_request, prefill_one, tiny_config, torch_threads


@pytest.fixture(scope="module")
def kernel():
    k = decode_attention.load()
    assert k is not None, "the kernel must build on a machine with a C compiler"
    return k


def rope_tables(positions: int, d: int, dtype):
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    freqs = torch.arange(positions).float()[:, None] * inv[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    sin = emb.sin()
    return emb.cos().to(dtype), torch.cat([-sin[:, : d // 2], sin[:, d // 2 :]], dim=-1).to(dtype)


def reference(qkv, cos, sin, pos, kv, heads, scale):
    """What DecoderModel does on torch's ops, one row at a time: RoPE on q and k (rounded
    in the model dtype as torch rounds it), the KV write, attention over [0, pos] in fp32."""
    n, _, d = qkv.shape
    hkv = kv.shape[1] // 2
    g = heads // hkv
    out = torch.empty(n, hkv, g, d)
    for b in range(n):
        p = int(pos[b])
        x = qkv[b]  # [H + 2 Hkv, D]
        swapped = x.view(-1, 2, d // 2).flip(-2).reshape(-1, d)
        roped = torch.addcmul(x * cos[p], swapped, sin[p])
        x = torch.cat([roped[: heads + hkv], x[heads + hkv :]])
        kv[b, :, p] = x[heads:]
        k, v = kv[b, :hkv, : p + 1].float(), kv[b, hkv:, : p + 1].float()
        q = x[:heads].view(hkv, g, d).float()
        out[b] = torch.softmax(q @ k.transpose(1, 2) * scale, dim=-1) @ v
    return out


def inputs(n, hkv, g, d, capacity, dtype, seed):
    torch.manual_seed(seed)
    qkv = torch.randn(n, hkv * g + 2 * hkv, d).to(dtype)
    kv = torch.randn(n, 2 * hkv, capacity, d).to(dtype)
    cos, sin = rope_tables(capacity, d, dtype)
    return qkv, kv, cos, sin


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("hkv, g, d", [(3, 3, 64), (2, 1, 64), (2, 4, 32), (1, 2, 128)])
def test_kernel_equals_torch_and_never_reads_past_a_row(kernel, dtype, hkv, g, d):
    n, capacity = 7, 96
    qkv, kv, cos, sin = inputs(n, hkv, g, d, capacity, dtype, seed=hkv * 100 + g * 10 + d)
    pos = torch.tensor([0, 1, 16, 49, 94, 95, 32])
    for b in range(n):  # whatever lies past a row's position must not reach its output
        kv[b, :, pos[b] + 1 :] = float("nan")
    expected_kv = kv.clone()
    expected = reference(qkv.clone(), cos, sin, pos, expected_kv, hkv * g, d**-0.5)
    out = torch.empty(n, hkv, g, d, dtype=dtype)
    kernel(qkv, cos, sin, pos, kv, out, hkv * g, d**-0.5)
    assert torch.isfinite(out).all()
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(out.float(), expected, rtol=tol, atol=tol)
    # the new token's k (with RoPE) and v are in the cache at each row's position
    for b in range(n):
        torch.testing.assert_close(kv[b, :, pos[b]].float(), expected_kv[b, :, pos[b]].float(),
                                   rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_rows_split_across_threads_equal_one_thread(kernel, dtype):
    """The OpenMP build splits a call's rows across torch's threads, each row one thread's
    (its RoPE, cache write and attention): the same result bit for bit, rows that do not
    split evenly included."""
    assert kernel.parallel, "the kernel was built without OpenMP"
    n, hkv, g, d = 23, 3, 3, 64
    qkv, kv, cos, sin = inputs(n, hkv, g, d, 64, dtype, seed=3)
    pos = torch.randint(0, 64, (n,))
    outs, caches = [], []
    for threads in (1, 2, 3):
        out, cache = torch.empty(n, hkv, g, d, dtype=dtype), kv.clone()
        with torch_threads(threads):
            kernel(qkv.clone(), cos, sin, pos, cache, out, hkv * g, 0.125)
        outs.append(out)
        caches.append(cache)
    for i in (1, 2):
        assert torch.equal(outs[0], outs[i]) and torch.equal(caches[0], caches[i])


def test_kernel_refuses_what_it_cannot_read_or_write(kernel):
    qkv, kv, cos, sin = inputs(2, 3, 3, 64, 8, torch.float32, seed=1)
    out = torch.empty(2, 3, 3, 64)
    with pytest.raises(ValueError, match="layout"):  # qkv not contiguous
        kernel(qkv.transpose(0, 1).contiguous().transpose(0, 1), cos, sin, torch.tensor([1, 2]), kv, out, 9, 0.1)
    before = kv.clone()
    with pytest.raises(RuntimeError, match="outside the cache"):  # position 8 of an 8-position cache
        kernel(qkv, cos, sin, torch.tensor([1, 8]), kv, out, 9, 0.1)
    assert torch.equal(kv, before)  # nothing was written


def test_decode_forward_on_the_kernel_matches_sdpa(tiny_dir):
    on_kernel = load_model(tiny_config(tiny_dir, kernels="ours")).model
    on_sdpa = load_model(tiny_config(tiny_dir, kernels="torch")).model
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
    config = tiny_config(tiny_dir, kernels="torch")
    loaded = load_model(config)
    prefill, decode = PrefillEngine(loaded, config), DecodeEngine(loaded, config)
    try:
        for i in (0, 6, 9):
            first = prefill_one(prefill, f"r{i}", PROMPTS[i])
            tokens, _ = decode.submit(decode_request(first, PROMPTS[i])).result(timeout=60)
            assert [first.first_token, *tokens] == tiny_reference(PROMPTS[i]), f"prompt {i}"
    finally:
        decode.shutdown()
