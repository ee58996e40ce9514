"""The block kernel (kernels/block_linear.c) and the GGUF blocks it reads (engine/gguf.py).

Blocks come from the gguf library's own quantizer and are checked against its own
dequantizer; the kernel's products against F.linear on those dequantized weights; the
matching against a GGUF file written with the library's writer from the tiny model, as
llama.cpp's converter lays q and k out."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.quants import dequantize, quantize

from inference.engine import gguf as engine_gguf
from inference.engine.decode import DecodeEngine
from inference.engine.fingerprint import model_fingerprint
from inference.engine.kernels import block_linear
from inference.engine.kernels.block_linear import Blocks
from inference.engine.linear import Linear
from inference.engine.loader import load_model
from inference.engine.prefill import PrefillEngine, PrefillRequest

from .conftest import (
    GREEDY,
    PROMPTS,
    decode_request,
    forced_logits,
    hf_greedy,
    tiny_config,
    torch_threads,
)

KINDS = ("Q4_1", "Q8_0")


@pytest.fixture(scope="module")
def kernel():
    k = block_linear.load()
    if k is None:
        pytest.skip("the block kernel needs AVX2 and FMA and a C compiler")
    return k


def blocks_of(kind: str, w: torch.Tensor) -> tuple[Blocks, np.ndarray]:
    raw = quantize(w.numpy(), GGMLQuantizationType[kind])
    return Blocks.from_gguf(kind, raw), raw


@pytest.mark.parametrize("kind", KINDS)
def test_blocks_dequantize_as_the_gguf_library_does(kind):
    torch.manual_seed(0)
    b, raw = blocks_of(kind, torch.randn(37, 96))
    expected = torch.from_numpy(dequantize(raw, GGMLQuantizationType[kind]))
    assert torch.equal(b.dequantize(), expected)
    order = torch.randperm(37)
    assert torch.equal(b.rows(order).dequantize(), expected[order])
    both = Blocks.cat([b, b.rows(order)])
    assert torch.equal(both.dequantize(), torch.cat([expected, expected[order]]))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n, k", [(576, 576), (101, 1536), (7, 32)])
@pytest.mark.parametrize("rows", [1, 2, 3, 5, 8, 16])
def test_rows_equal_f_linear_on_the_dequantized_weights(kernel, kind, n, k, rows):
    torch.manual_seed(n + k + rows)
    b, _ = blocks_of(kind, torch.randn(n, k) * 0.05)
    w = b.dequantize()
    bias, x, residual = torch.randn(n), torch.randn(rows, 1, k), torch.randn(rows, 1, n)
    torch.testing.assert_close(kernel.linear(b, None, x), F.linear(x, w), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(kernel.linear(b, bias, x, residual), residual + F.linear(x, w, bias),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_swiglu_equals_silu_gate_times_up(kernel, kind):
    torch.manual_seed(1)
    b, _ = blocks_of(kind, torch.randn(2 * 96, 64) * 0.3)
    x = torch.randn(3, 64)
    gate, up = F.linear(x, b.dequantize()).chunk(2, dim=-1)
    torch.testing.assert_close(kernel.swiglu(b, x), F.silu(gate) * up, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 3])
def test_columns_split_across_threads_equal_one_thread(kernel, dtype, rows):
    """The kernel's OpenMP build splits each call's output columns across torch's threads,
    a decode step's small matrices too (a Python pool only repaid the LM head's width):
    every column is one thread's whole sum, so two threads give one thread's result bit
    for bit, here for columns that do not halve evenly."""
    if dtype == torch.bfloat16 and not kernel.bf16:
        pytest.skip("bf16 rows on the blocks need AVX512-BF16 and VNNI")
    assert kernel.parallel, "the kernel was built without OpenMP"
    torch.manual_seed(2)
    odd, _ = blocks_of("Q4_1", torch.randn(517, 288) * 0.1)
    gu, _ = blocks_of("Q4_1", torch.randn(2 * 544, 288) * 0.1)
    dn, _ = blocks_of("Q8_0", torch.randn(288, 544) * 0.1)
    if dtype == torch.bfloat16:
        odd, gu, dn = (kernel.prepare(b, dtype) for b in (odd, gu, dn))
    odd, gate_up, down = (kernel.bind(b, dtype=dtype) for b in (odd, gu, dn))
    x = torch.randn(rows, 1, 288).to(dtype)
    outs = []
    for threads in (1, 2):
        with torch_threads(threads):
            mid = gate_up.swiglu(x)
            outs.append((odd.linear(x), mid, down.linear(mid, residual=x),
                         gate_up.mlp(down, x) if dtype == torch.bfloat16 else mid))
    for one, two in zip(*outs, strict=True):
        assert torch.equal(one, two)


def test_refused_shapes_raise_and_more_rows_stay_on_f_linear(kernel):
    b, _ = blocks_of("Q4_1", torch.randn(16, 64))
    with pytest.raises(ValueError, match="rows of the weight's width"):
        kernel.linear(b, None, torch.randn(kernel.max_rows + 1, 64))
    with pytest.raises(ValueError, match="no kernel for torch.float16 rows"):
        kernel.linear(b, None, torch.randn(1, 64).half())
    with pytest.raises(ValueError, match="residual"):
        kernel.linear(b, None, torch.randn(1, 64), torch.randn(1, 15))
    with pytest.raises(ValueError, match="norm .scale or RMS. in the matmul takes bf16"):
        kernel.linear(b, None, torch.randn(1, 64), ln=torch.ones(64))
    lin = Linear.build(b.dequantize(), device=torch.device("cpu"), dtype=torch.float32, kind="plain",
                       block_kernel=kernel, blocks=b)
    many = torch.randn(kernel.max_rows + 1, 64)
    assert lin.few.takes(many[:1]) and not lin.few.takes(many)
    assert torch.equal(lin(many), F.linear(many, lin.w))  # past max_rows: exactly F.linear


@pytest.fixture(scope="module")
def bf16_kernel(kernel):
    if not kernel.bf16:
        pytest.skip("bf16 rows on the blocks need AVX512-BF16 and VNNI")
    return kernel


def bf16_reference(w: torch.Tensor, x: torch.Tensor, ln: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """What the bf16 rows compute: the bf16 x times the norm scale, unrounded, by the
    dequantized fp32 weights, in fp32; and the most the int16 activations (half a step of
    max |x| / 32767 per block of 32) can move each sum."""
    xs = x.float() * (1 if ln is None else ln)
    step = xs.abs().unflatten(-1, (-1, 32)).amax(-1, keepdim=True).expand(*xs.shape[:-1], -1, 32).flatten(-2) / 32767
    return F.linear(xs, w), F.linear(step / 2, w.abs())


def assert_bf16_of(got: torch.Tensor, exact: torch.Tensor, moved: torch.Tensor) -> None:
    """got is exact, moved by at most `moved`, rounded to bf16 (half a unit in the last place)."""
    assert got.dtype == torch.bfloat16
    err = (got.float() - exact).abs()
    bound = moved * 1.01 + (exact.abs() + moved) * 2.0**-8 + 1e-7
    assert bool((err <= bound).all()), f"max error {err.max():.3g}, over its bound by {(err - bound).max():.3g}"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n, k", [(576, 576), (101, 1536), (7, 32)])
@pytest.mark.parametrize("rows", [1, 2, 3, 5, 16])
@pytest.mark.parametrize("fold", [False, True])
def test_bf16_rows_give_the_fp32_product_rounded(bf16_kernel, kind, n, k, rows, fold):
    torch.manual_seed(n + k + rows + fold)
    b, _ = blocks_of(kind, torch.randn(n, k) * 0.05)
    w, b = b.dequantize(), bf16_kernel.prepare(b, torch.bfloat16)
    assert torch.equal(b.dequantize(), w)  # the file's fp16 scales, exactly
    ln = torch.rand(k) + 0.5 if fold else None
    x = torch.randn(rows, 1, k).bfloat16()
    x[0, 0, 3] = 40.0  # an outlier in one block: the block's int16 scale follows it
    bias, residual = torch.randn(n).bfloat16(), torch.randn(rows, 1, n).bfloat16()
    exact, moved = bf16_reference(w, x, ln)
    assert_bf16_of(bf16_kernel.linear(b, None, x, ln=ln), exact, moved)
    assert_bf16_of(bf16_kernel.linear(b, bias, x, residual, ln=ln), exact + bias.float() + residual.float(), moved)


@pytest.mark.parametrize("kind", KINDS)
def test_bf16_rows_rms_normalized_in_the_kernel(bf16_kernel, kind):
    """norm_eps: each row divided by sqrt(mean(x^2) + eps) before the scale, as the model's
    RMSNorm would (here in fp32, without its rounding to bf16)."""
    torch.manual_seed(5)
    b, _ = blocks_of(kind, torch.randn(64, 96) * 0.05)
    w, b = b.dequantize(), bf16_kernel.prepare(b, torch.bfloat16)
    ln, eps = torch.rand(96) + 0.5, 1e-5
    x = (torch.randn(3, 96) * torch.tensor([[0.01], [1.0], [30.0]])).bfloat16()  # rows of any scale
    normed = x.float() / torch.sqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
    exact, moved = bf16_reference(w, normed.bfloat16(), ln)
    exact = F.linear(normed * ln, w)  # from the unrounded normalized rows
    assert_bf16_of(bf16_kernel.linear(b, None, x, ln=ln, norm_eps=eps), exact, moved * 1.01 + 1e-6)
    gate, up = exact.chunk(2, dim=-1)
    torch.testing.assert_close(bf16_kernel.swiglu(b, x, ln, norm_eps=eps).float(),
                               (F.silu(gate).bfloat16().float() * up).bfloat16().float(), rtol=2**-6, atol=2e-3)
    with pytest.raises(ValueError, match="eps"):
        bf16_kernel.linear(b, None, x, ln=ln, norm_eps=-1.0)


@pytest.mark.parametrize("kind", KINDS)
def test_bf16_swiglu_rounds_as_the_packed_post_ops(bf16_kernel, kind):
    torch.manual_seed(3)
    b, _ = blocks_of(kind, torch.randn(2 * 96, 64) * 0.3)
    b = bf16_kernel.prepare(b, torch.bfloat16)
    ln = torch.rand(64) + 0.5
    x = torch.randn(3, 64).bfloat16()
    gate, up = bf16_reference(b.dequantize(), x, ln)[0].chunk(2, dim=-1)
    expected = (F.silu(gate).bfloat16().float() * up).bfloat16()
    got = bf16_kernel.swiglu(b, x, ln)
    # two units in the last place: the gate's own rounding can flip with the int16 activations
    torch.testing.assert_close(got.float(), expected.float(), rtol=2**-6, atol=2e-3)


@pytest.mark.parametrize("rows", [1, 3])
def test_the_mlp_in_one_call_is_its_two_calls(bf16_kernel, rows):
    """x + down(swiglu(x)): the same sums, roundings and residual as swiglu then linear."""
    torch.manual_seed(6)
    gu, _ = blocks_of("Q4_1", torch.randn(2 * 64, 96) * 0.1)
    dn, _ = blocks_of("Q4_1", torch.randn(96, 64) * 0.1)
    ln = torch.rand(96) + 0.5
    gate_up = bf16_kernel.bind(bf16_kernel.prepare(gu, torch.bfloat16), None, ln, dtype=torch.bfloat16)
    down = bf16_kernel.bind(bf16_kernel.prepare(dn, torch.bfloat16), dtype=torch.bfloat16)
    x = torch.randn(rows, 1, 96).bfloat16()
    two_calls = down.linear(gate_up.swiglu(x, 1e-5), residual=x)
    assert torch.equal(gate_up.mlp(down, x, 1e-5), two_calls)
    with pytest.raises(ValueError, match="down projection"):
        gate_up.mlp(gate_up, x, 1e-5)


def test_a_zero_block_of_activations_gives_zero(bf16_kernel):
    b, _ = blocks_of("Q4_1", torch.randn(8, 64))
    x = torch.zeros(1, 64).bfloat16()
    x[0, 40] = 1.0  # the first block all zeros (its int16 scale 0), the second one-hot
    with pytest.raises(ValueError, match="prepare"):  # fp32 scales are the fp32 loop's
        bf16_kernel.linear(b, None, x)
    got = bf16_kernel.linear(bf16_kernel.prepare(b, torch.bfloat16), None, x)
    assert torch.equal(got, b.dequantize()[:, 40].bfloat16()[None])


def write_gguf(path, hf_model) -> None:
    """The tiny model's matrices as Q4_1 (the embedding as Q8_0), q and k rows in
    llama.cpp's order, and the model's weights set to what the file dequantizes to."""
    cfg = hf_model.config
    writer = GGUFWriter(str(path), "llama")
    params = dict(hf_model.named_parameters())
    for layer in range(cfg.num_hidden_layers):
        for role, hf in engine_gguf.LAYER_NAMES.items():
            w = params[f"model.layers.{layer}.{hf}.weight"]
            heads = {"attn_q": cfg.num_attention_heads, "attn_k": cfg.num_key_value_heads}.get(role)
            file_rows = torch.argsort(engine_gguf.unpermute_rows(w.shape[0], heads)) if heads else None
            writer.add_tensor(f"blk.{layer}.{role}.weight", *quantized(w, "Q4_1", file_rows))
    writer.add_tensor("token_embd.weight", *quantized(params["model.embed_tokens.weight"], "Q8_0", None))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def quantized(w: torch.nn.Parameter, kind: str, file_rows: torch.Tensor | None):
    qtype = GGMLQuantizationType[kind]
    data = w.detach()[file_rows] if file_rows is not None else w.detach()
    raw = quantize(data.numpy(), qtype)
    back = torch.from_numpy(dequantize(raw, qtype))
    with torch.no_grad():  # the weights a converter would have loaded from this file
        w.copy_(back[torch.argsort(file_rows)] if file_rows is not None else back)
    return raw, raw.shape, qtype


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory, tiny_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32).eval()
    out = tmp_path_factory.mktemp("gguf")
    write_gguf(out / "tiny.gguf", model)
    model.save_pretrained(out / "model", safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (out / "model" / name).write_bytes((tiny_dir / name).read_bytes())
    return out / "tiny.gguf", out / "model", model


def test_every_matrix_matches_and_the_blocks_round_trip(tiny_gguf, monkeypatch):
    path, model_dir, model = tiny_gguf
    found = engine_gguf.matching_blocks(path, model)
    layers = model.config.num_hidden_layers
    assert len(found) == 7 * layers + 2  # the tied LM head shares the embedding's blocks
    assert found["lm_head.weight"] is found["model.embed_tokens.weight"]
    q = found["model.layers.0.self_attn.q_proj.weight"]
    assert torch.equal(q.dequantize(), model.model.layers[0].self_attn.q_proj.weight)
    engine_gguf.save_blocks(model_dir, found)
    back = engine_gguf.load_blocks(model_dir, model_fingerprint(model_dir))
    assert back.keys() == found.keys()
    assert all(torch.equal(back[n].dequantize(), b.dequantize()) for n, b in found.items())
    assert engine_gguf.load_blocks(model_dir, "another-fingerprint") == {}
    monkeypatch.setattr(engine_gguf, "BLOCKS_LAYOUT", "another-layout")  # written for another kernel
    assert engine_gguf.load_blocks(model_dir, model_fingerprint(model_dir)) == {}


def test_a_weight_that_is_not_the_files_keeps_no_blocks(tiny_gguf):
    path, _, model = tiny_gguf
    w = model.model.layers[1].mlp.down_proj.weight
    before = w.detach().clone()
    with torch.no_grad():
        w[3, 5] += 1e-3
    try:
        found = engine_gguf.matching_blocks(path, model)
    finally:
        with torch.no_grad():
            w.copy_(before)
    assert "model.layers.1.mlp.down_proj.weight" not in found
    assert "model.layers.0.mlp.down_proj.weight" in found


def test_engine_on_the_blocks_is_greedy_equal_to_hf(kernel, tiny_gguf):
    """Prefill (many rows: F.linear) and decode batches of up to three rows (the blocks)."""
    path, model_dir, hf_model = tiny_gguf
    engine_gguf.save_blocks(model_dir, engine_gguf.matching_blocks(path, hf_model))
    config = tiny_config(model_dir)
    loaded = load_model(config)
    assert loaded.model.layers[0].gate_up.few is not None and loaded.model.lm_head.few is not None
    prompts = PROMPTS[3:6]
    (eos,) = loaded.eos_token_ids
    prefill, decode = PrefillEngine(loaded, config), DecodeEngine(loaded, config)
    try:
        results = prefill.prefill([PrefillRequest(f"r{i}", p, GREEDY) for i, p in enumerate(prompts)])
        handles = [decode.submit(decode_request(r, p)) for r, p in zip(results, prompts, strict=True)]
        for p, r, h in zip(prompts, results, handles, strict=True):
            tokens, _ = h.result(timeout=60)
            assert [r.first_token, *tokens] == hf_greedy(hf_model, p, GREEDY.max_tokens, eos)
    finally:
        decode.shutdown()


def test_a_bf16_model_runs_few_rows_on_the_blocks_and_tracks_hf(bf16_kernel, tiny_gguf):
    """Decode steps of one row through the blocks (block_rows fixed, not timed) stay as
    close to HF's fp32 logits as the bf16 model does."""
    from inference.engine.model import DecoderModel

    path, model_dir, file_model = tiny_gguf
    blocks = engine_gguf.matching_blocks(path, file_model)
    hf_model = copy.deepcopy(file_model)
    torch.manual_seed(4)
    with torch.no_grad():  # norm scales that are not 1, as bf16 holds them: the fold is exercised
        for name, p in hf_model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_((torch.rand_like(p) + 0.5).bfloat16().float())
    bf16_hf = copy.deepcopy(hf_model).to(torch.bfloat16)
    model = DecoderModel(bf16_hf, device=torch.device("cpu"), dtype=torch.bfloat16, max_context=64,
                         blocks=blocks, block_rows=3)
    assert model.block_rows == 3
    one, four = torch.zeros(1, 1, hf_model.config.hidden_size), torch.zeros(4, 1, hf_model.config.hidden_size)
    for lin in (model.layers[0].qkv, model.layers[0].gate_up, model.layers[-1].down, model.lm_head):
        assert isinstance(lin.few.w, Blocks) and lin.few.max_rows == 3
        assert lin.few.takes(one, lin.few.halves) and not lin.few.takes(four, lin.few.halves)
    tokens = [(29 * j + 5) % 200 + 3 for j in range(24)]  # 16 prompt tokens, 8 decode steps
    with torch.inference_mode():
        ref = hf_model(torch.tensor([tokens])).logits[0]
    for i, lg in enumerate(forced_logits(model, tokens, 16)):
        expected = ref[15 + i]
        assert torch.nn.functional.cosine_similarity(lg, expected, dim=0) > 0.999, f"step {i}"
        assert (lg - expected).abs().max() < 0.2 * expected.std(), f"step {i}"


def test_the_rows_on_the_blocks_are_timed_at_load_and_held_by_every_matmul(bf16_kernel, tiny_gguf):
    """block_rows None: a pass over the model's matmuls on the blocks against one on oneDNN,
    one row count after another; every matmul then takes what that found (none: the
    one-row kernel instead)."""
    from transformers import AutoModelForCausalLM

    from inference.engine.model import DecoderModel

    path, model_dir, file_model = tiny_gguf
    blocks = engine_gguf.matching_blocks(path, file_model)
    bf16_hf = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).eval()
    model = DecoderModel(bf16_hf, device=torch.device("cpu"), dtype=torch.bfloat16, max_context=64, blocks=blocks)
    assert 0 <= model.block_rows <= bf16_kernel.max_rows
    on_blocks = [lin for lin in model.linears() if lin.few is not None and isinstance(lin.few.w, Blocks)]
    assert len(on_blocks) == (len(model.linears()) if model.block_rows else 0)
    assert {lin.few.max_rows for lin in on_blocks} <= {model.block_rows}
