"""int8 weights: the kernel computes what the quantized weights say, the engines produce
exactly the int8 model's own step-by-step output, "auto" picks int8 only with a passing
quality verdict for these very weights, and the quality check runs on the real model."""

from __future__ import annotations

import json

import pytest
import torch

from inference.engine import precision
from inference.engine.config import EngineConfig
from inference.engine.cpu import cpu_has_vnni
from inference.engine.linear import Linear, can_int8
from inference.engine.loader import load_model, model_fingerprint
from inference.engine.model import CacheGroup
from inference.engine.prefill import PrefillEngine, PrefillRequest
from inference.engine.prepare import DEFAULT_DIR as REAL_MODEL_DIR
from inference.engine.sampling import SamplingParams

from .conftest import PROMPTS, decode_request, tiny_config

pytestmark = pytest.mark.skipif(not can_int8(), reason="no FBGEMM quantized engine on this machine")
RUN = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)


@pytest.fixture(scope="module")
def tiny_int8(tiny_dir):
    config = tiny_config(tiny_dir, dtype="int8")
    return load_model(config), config


def own_reference(model, prompt: list[int], n: int) -> list[int]:
    """n greedy tokens from the int8 model alone: the prompt in one forward, then one
    decode forward per token (the shapes the engines run for a lone sequence)."""
    kvs, logits = model.prefill([prompt], [None])
    out = [int(logits[0].argmax())]
    cache = model.new_kv(1, len(prompt) + n + 1)
    hkv = model.shape.num_kv_heads
    cache[:, 0, :hkv, : len(prompt)], cache[:, 0, hkv:, : len(prompt)] = kvs[0]
    for pos in range(len(prompt), len(prompt) + n - 1):
        step = model.forward(torch.tensor([[out[-1]]]), torch.tensor([[pos]]), [CacheGroup(cache, 0, pos + 1)],
                             torch.zeros(1, dtype=torch.long))
        out.append(int(step[0].argmax()))
    return out


def test_int8_matmuls_compute_what_their_quantized_weights_say():
    torch.manual_seed(0)
    w, b, x = torch.randn(96, 64) * 0.1, torch.randn(96) * 0.1, torch.randn(5, 3, 64)
    lin = Linear.build(w, b, device=torch.device("cpu"), dtype=torch.float32, kind="int8")
    wq = torch.ops.quantized.linear_unpack(lin.w)[0].dequantize()
    torch.testing.assert_close(wq, w, atol=w.abs().max().item() / 127, rtol=0)  # per-channel int8
    ref = torch.nn.functional.linear(x, wq, b)
    assert (lin(x) - ref).norm() / ref.norm() < 0.02  # only the activations' 8 bits remain
    assert lin.add(x, ref).sub(2 * ref).norm() / ref.norm() < 0.04


def test_an_int8_model_runs_fp32_activations_and_kv(tiny_int8):
    loaded, config = tiny_int8
    assert config.resolve_dtype() == torch.float32 and config.resolve_weights() == "int8"
    assert loaded.model.linear_kind == "int8" and loaded.model.dtype == torch.float32


def test_int8_engines_produce_the_int8_models_own_output(tiny_int8):
    from inference.engine.colocated import ColocatedEngine
    from inference.engine.decode import DecodeEngine

    loaded, config = tiny_int8
    prefill = PrefillEngine(loaded, config)
    decode = DecodeEngine(loaded, config)
    colocated = ColocatedEngine(loaded, config)
    try:
        for i in (3, 7, 9):
            expected = own_reference(loaded.model, PROMPTS[i], RUN.max_tokens)
            (res,) = prefill.prefill([PrefillRequest(f"d{i}", PROMPTS[i], RUN)])
            tokens, _ = decode.submit(decode_request(res, PROMPTS[i], RUN)).result(timeout=60)
            assert [res.first_token, *tokens] == expected, f"disaggregated, prompt {i}"
            tokens, _ = colocated.submit(f"c{i}", PROMPTS[i], RUN).result(timeout=60)
            assert tokens == expected, f"colocated, prompt {i}"
    finally:
        decode.shutdown()
        colocated.shutdown()


def test_auto_picks_int8_only_with_a_passing_verdict_for_these_weights(tiny_dir, tmp_path, monkeypatch):
    import shutil

    from inference.engine import cpu

    monkeypatch.setattr(cpu, "cpu_flags", lambda: {"avx512_vnni", "avx512_bf16"})
    model_dir = tmp_path / "model"
    shutil.copytree(tiny_dir, model_dir)
    cfg = EngineConfig(model=model_dir, device="cpu")
    precision.int8_verdict.cache_clear()
    assert cfg.resolve_precision() == "bfloat16"  # no verdict
    precision.record_verdict(model_dir, "int8", {"passes": False})
    assert cfg.resolve_precision() == "bfloat16"  # measured and failed
    precision.record_verdict(model_dir, "int8", {"passes": True})
    assert cfg.resolve_precision() == "int8"
    record = json.loads((model_dir / precision.QUALITY_FILE).read_text())
    record["int8"]["fingerprint"] = "other-weights"
    (model_dir / precision.QUALITY_FILE).write_text(json.dumps(record))
    precision.int8_verdict.cache_clear()
    assert cfg.resolve_precision() == "bfloat16"  # a verdict for other weights counts for nothing
    assert record["int8"]["passes"] and model_fingerprint(model_dir) != "other-weights"
    monkeypatch.setattr(cpu, "cpu_flags", lambda: {"avx512_vnni", "avx512_bf16", "amx_bf16"})
    precision.record_verdict(model_dir, "int8", {"passes": True})
    assert cfg.resolve_precision() == "bfloat16"  # AMX: bf16 is the fast path
    precision.int8_verdict.cache_clear()


@pytest.mark.real_model
def test_real_smollm2_quality_slice_and_auto_serves_int8_only_if_it_passes():
    from benchmarks.engine.quality import compare, score, windows

    def scores(precision_name):
        loaded = load_model(EngineConfig(model=REAL_MODEL_DIR, device="cpu", dtype=precision_name,
                                         max_context=256))
        return loaded, score(loaded.model, windows(loaded.tokenizer, limit=2), "prefill")

    bf16, ref = scores("bfloat16")
    _, fp32 = scores("float32")
    _, int8 = scores("int8")
    assert compare(fp32, ref)["agreement"] > 0.95  # the check itself: fp32 tracks bf16
    q = compare(int8, ref)
    # int8 is degraded, not broken (a wrong scale gives near-zero agreement and a perplexity
    # many times bf16's). Without VNNI, FBGEMM quantizes activations to 7 bits
    # (reduce_range), which costs more: 44% agreement and 3.1x perplexity on these two
    # windows on an AMD EPYC Zen 3 guest (AVX2), against 0.5-0.6 and < 2x with VNNI.
    agreement, ppl_ratio = (0.4, 2.0) if cpu_has_vnni() else (0.3, 5.0)
    assert q["agreement"] > agreement and q["ppl_ratio"] < ppl_ratio, q
    auto = EngineConfig(model=REAL_MODEL_DIR, device="cpu").resolve_precision()
    assert auto != "int8" or q["passes"], f"auto serves int8 that fails the bar: {q}"
