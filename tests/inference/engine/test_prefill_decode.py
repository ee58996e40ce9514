"""Prefill -> KVCache -> decode produces exactly what Hugging Face generate produces."""

from __future__ import annotations

import json
import threading

import pytest
import torch

from inference.engine.config import EngineConfig
from inference.engine.kernels import block_linear
from inference.engine.kv import KVCache
from inference.engine.loader import UnsupportedModelError, load_model
from inference.engine.model import DecoderModel
from inference.engine.prefill import PrefillEngine, PrefillRequest
from inference.engine.prepare import DEFAULT_DIR as REAL_MODEL_DIR
from inference.engine.sampling import SamplingParams

from .conftest import (
    GREEDY,
    PROMPTS,
    decode_request,
    forced_logits,
    hf_argmax_loop,
    hf_greedy,
    prefill_one,
    prompt,
    tiny_config,
)


def run_disaggregated(prefill_engine, decode, prompts, *, prefill_groups):
    """Prefill in the given groups (batch compositions), submit to decode as each group's
    results come back, and return every prompt's full output (index 0 first)."""
    handles = {}
    for group in prefill_groups:
        results = prefill_engine.prefill(
            [PrefillRequest(f"r{i}", prompts[i], GREEDY) for i in group]
        )
        for i, res in zip(group, results, strict=True):
            assert res.request_id == f"r{i}" and res.kv.length == len(prompts[i])
            handles[i] = (res.first_token, decode.submit(decode_request(res, prompts[i])))
    outputs = {}
    for i, (first, handle) in handles.items():
        tokens, finish = handle.result(timeout=60)
        outputs[i] = [first, *tokens]
        assert finish.stats.output_tokens == len(outputs[i])
    return outputs


@pytest.mark.parametrize(
    "groups, max_batch",
    [
        ([list(range(10))], 4),  # one prefill call, micro-batched by 4; decode slots < prompts
        ([[9, 0, 5], [1, 8], [2, 3, 4, 6, 7]], 3),  # mixed lengths per batch, staggered joins
        ([[i] for i in range(10)], 10),  # one at a time, everyone in one decode batch
    ],
)
def test_greedy_output_through_prefill_and_decode_equals_hf_generate(
    prefill_engine, make_decode, tiny_reference, groups, max_batch
):
    decode = make_decode(max_batch=max_batch)
    outputs = run_disaggregated(prefill_engine, decode, PROMPTS, prefill_groups=groups)
    for i, p in enumerate(PROMPTS):
        assert outputs[i] == tiny_reference(p), f"prompt {i} ({len(p)} tokens)"


def test_sequences_joining_mid_flight_do_not_change_the_running_ones(
    prefill_engine, make_decode, tiny_reference, hf_tiny
):
    decode = make_decode(max_batch=8)
    long_run = SamplingParams(temperature=0, max_tokens=40, ignore_eos=True)
    reached = threading.Event()

    def on_token(rid, index, token, ts):
        if index == 10:
            reached.set()

    first = prefill_one(prefill_engine, "early", PROMPTS[6], long_run)
    early = decode.submit(decode_request(first, PROMPTS[6], long_run, on_token=on_token))
    assert reached.wait(30)
    late = []
    for i in (3, 8, 9):
        res = prefill_one(prefill_engine, f"late{i}", PROMPTS[i])
        late.append((i, res.first_token, decode.submit(decode_request(res, PROMPTS[i]))))
    early_tokens, finish = early.result(timeout=60)
    assert finish.finish_reason == "length"
    assert [first.first_token, *early_tokens] == hf_argmax_loop(hf_tiny, PROMPTS[6], 40)
    for i, tok0, handle in late:
        tokens, _ = handle.result(timeout=60)
        assert [tok0, *tokens] == tiny_reference(PROMPTS[i])


def test_rows_of_different_lengths_and_rows_outgrowing_their_cache_decode_exactly(
    prefill_engine, make_decode, hf_tiny
):
    """A 150-token row runs beside short ones in a wider cache of its own, and a 100-token
    row outgrows the 128-position cache mid-stream and moves: nobody's output changes."""
    decode = make_decode(max_batch=4)
    run = SamplingParams(temperature=0, max_tokens=48, ignore_eos=True)
    prompts = {"short": prompt(20, 5), "grows": prompt(21, 100), "long": prompt(22, 150)}
    firsts = prefill_engine.prefill([PrefillRequest(rid, p, run) for rid, p in prompts.items()])
    classes_seen: set[int] = set()

    def on_token(rid, index, token, ts):  # runs on the engine thread, between steps
        classes_seen.update(c for c, cls in decode.runner.classes.items() if cls.seqs)

    handles = {r.request_id: (r.first_token, decode.submit(decode_request(r, prompts[r.request_id], run,
                                                                          on_token=on_token)))
               for r in firsts}
    for rid, (first, handle) in handles.items():
        tokens, _ = handle.result(timeout=60)
        assert [first, *tokens] == hf_argmax_loop(hf_tiny, prompts[rid], 48), rid
    assert classes_seen == {128, 256}  # both capacity classes held sequences
    assert decode.runner.classes == {}  # and an idle engine holds no cache


def test_prefill_batch_composition_changes_neither_first_token_nor_kv(prefill_engine):
    alone = [prefill_one(prefill_engine, f"a{i}", PROMPTS[i]) for i in (2, 7, 9)]
    together = prefill_engine.prefill([PrefillRequest(f"t{i}", PROMPTS[i], GREEDY) for i in (2, 7, 9)])
    for a, t in zip(alone, together, strict=True):
        assert a.first_token == t.first_token
        assert a.kv.k.shape == t.kv.k.shape and a.kv.k.device.type == "cpu" and a.kv.k.is_contiguous()
        torch.testing.assert_close(a.kv.k, t.kv.k, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(a.kv.v, t.kv.v, rtol=1e-4, atol=1e-5)
        assert set(t.timings) >= {"queue_ms", "compute_ms"}


def test_kv_through_the_shared_memory_store_decodes_the_same(prefill_engine, make_decode, tiny_reference, tmp_path):
    from inference.kvstore import SharedMemoryKVStore

    store = SharedMemoryKVStore(tmp_path / "kv")
    decode = make_decode()
    res = prefill_one(prefill_engine, "via-store", PROMPTS[8])
    store.put("via-store", res.kv, ttl_s=60)
    res.kv = store.take("via-store", expected_fingerprint=prefill_engine.fingerprint)
    tokens, _ = decode.submit(decode_request(res, PROMPTS[8])).result(timeout=60)
    assert [res.first_token, *tokens] == tiny_reference(PROMPTS[8])


def test_decode_refuses_kv_computed_with_other_weights(prefill_engine, make_decode):
    decode = make_decode()
    res = prefill_one(prefill_engine, "foreign", PROMPTS[3])
    res.kv = KVCache(res.kv.k, res.kv.v, "some-other-model")
    with pytest.raises(ValueError, match="computed with model"):
        decode.submit(decode_request(res, PROMPTS[3]))


def test_prefill_reports_when_the_first_token_already_ends_the_sequence(prefill_engine):
    plain = prefill_one(prefill_engine, "p", PROMPTS[4])
    assert plain.finish_reason is None
    stop = SamplingParams(temperature=0, stop_token_ids=(plain.first_token,))
    assert prefill_one(prefill_engine, "s", PROMPTS[4], stop).finish_reason == "stop"
    one = SamplingParams(temperature=0, max_tokens=1)
    assert prefill_one(prefill_engine, "l", PROMPTS[4], one).finish_reason == "length"


def test_prefill_refuses_empty_and_overlong_prompts(prefill_engine):
    with pytest.raises(ValueError):
        prefill_one(prefill_engine, "empty", [])
    with pytest.raises(ValueError):
        prefill_one(prefill_engine, "long", prompt(0, prefill_engine.config.max_context))


def test_loader_refuses_a_missing_directory_and_an_unsupported_architecture(tmp_path, tiny_dir):
    with pytest.raises(UnsupportedModelError, match="does not exist"):
        load_model(EngineConfig(model=tmp_path / "nowhere"))
    odd = tmp_path / "gpt2ish"
    odd.mkdir()
    config = json.loads((tiny_dir / "config.json").read_text())
    config.update(model_type="gpt2", architectures=["GPT2LMHeadModel"])
    (odd / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedModelError, match="not supported"):
        load_model(EngineConfig(model=odd))


def test_fingerprint_tells_weights_apart_but_not_dtypes(tiny, tiny_dir, tmp_path):
    from inference.engine.loader import model_fingerprint
    from inference.engine.tiny import build_tiny_model

    other = build_tiny_model(tmp_path / "other", seed=1)
    assert model_fingerprint(other) != tiny.fingerprint
    # A bf16 tier and an fp32 tier of the same weights accept each other's KV.
    assert load_model(tiny_config(tiny_dir, dtype="bfloat16")).fingerprint == tiny.fingerprint


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_prefill_and_decode_logits_track_hf_with_norm_scales_and_biases(odd_llama, dtype):
    """fp32 must match HF closely; bf16 (packed weights, norm scales folded in, fused
    post-ops on a CPU with AMX) cannot match exactly but must stay close."""
    model = DecoderModel(odd_llama, device=torch.device("cpu"), dtype=dtype, max_context=128)
    tokens = [(37 * j + 11) % 500 + 3 for j in range(30)]  # 22 prompt tokens, 8 decode steps
    with torch.inference_mode():
        ref = odd_llama(torch.tensor([tokens])).logits[0]  # [len, V] fp32
    for i, lg in enumerate(forced_logits(model, tokens, 22)):
        expected = ref[21 + i]
        if dtype == torch.float32:
            torch.testing.assert_close(lg, expected, rtol=1e-4, atol=1e-4)
        else:
            assert torch.nn.functional.cosine_similarity(lg, expected, dim=0) > 0.999, f"step {i}"
            assert (lg - expected).abs().max() < 0.2 * expected.std(), f"step {i}"


@pytest.mark.real_model
def test_real_smollm2_greedy_chat_output_equals_hf_generate():
    from transformers import AutoModelForCausalLM

    from inference.engine.decode import DecodeEngine

    config = EngineConfig(model=REAL_MODEL_DIR, device="cpu", dtype="float32", max_context=512, max_batch=4)
    loaded = load_model(config)
    # Decode batches of up to three rows read the GGUF's blocks (kernels/block_linear.py).
    assert block_linear.load() is None or loaded.model.layers[0].qkv.few is not None
    hf = AutoModelForCausalLM.from_pretrained(REAL_MODEL_DIR, dtype=torch.float32).eval()
    tok = loaded.tokenizer
    chats = [
        "What is the capital of France?",
        "Write a haiku about customer support.",
        "My order #1234 has not arrived. What should I do?",
    ]
    prompts = [
        tok.apply_chat_template([{"role": "user", "content": c}], add_generation_prompt=True, tokenize=True)
        for c in chats
    ]
    (eos,) = loaded.eos_token_ids
    sampling = SamplingParams(temperature=0, max_tokens=24)
    prefill = PrefillEngine(loaded, config)
    decode = DecodeEngine(loaded, config)
    try:
        results = prefill.prefill([PrefillRequest(f"chat{i}", p, sampling) for i, p in enumerate(prompts)])
        handles = [decode.submit(decode_request(r, p, sampling)) for r, p in zip(results, prompts, strict=True)]
        for p, r, h in zip(prompts, results, handles, strict=True):
            tokens, _ = h.result(timeout=120)
            assert [r.first_token, *tokens] == hf_greedy(hf, p, 24, eos)
    finally:
        decode.shutdown()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_long_prompts_prefill_in_causal_chunks_as_hf_computes_them(tiny_dir, hf_tiny, dtype):
    """Prompts longer than two CAUSAL_CHUNKs take the chunked causal path (a batch of two
    lengths, so one row is padded): each row's last logits match HF's forward of that
    prompt alone (fp32 closely, with its KV; bf16 within its rounding), and the masked
    path the engine takes for a prompt after a cached past gives the same KV."""
    from inference.engine.model import CAUSAL_CHUNK

    model = load_model(tiny_config(tiny_dir, dtype="float32" if dtype == torch.float32 else "bfloat16",
                                   max_context=1024)).model
    prompts = [prompt(1, 2 * CAUSAL_CHUNK + 77), prompt(2, 3 * CAUSAL_CHUNK + 5)]
    kvs, logits = model.prefill(prompts, [None, None])
    if dtype == torch.float32:
        hf = hf_tiny
    else:  # loaded in bf16 (casting the fp32 model would round its RoPE frequencies too)
        from transformers import AutoModelForCausalLM

        hf = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.bfloat16).eval()
    for p, (k, v), lg in zip(prompts, kvs, logits, strict=True):
        with torch.inference_mode():
            out = hf(torch.tensor([p]), use_cache=True)
        expected = out.logits[0, -1].float()
        if dtype == torch.float32:
            torch.testing.assert_close(lg.float(), expected, rtol=1e-4, atol=1e-4)
            layers = _legacy(out.past_key_values)
            torch.testing.assert_close(k, torch.stack([kv[0][0] for kv in layers]), rtol=1e-4, atol=1e-4)  # [L, Hkv, n, D]
            torch.testing.assert_close(v, torch.stack([kv[1][0] for kv in layers]), rtol=1e-4, atol=1e-4)
        else:
            assert torch.nn.functional.cosine_similarity(lg.float(), expected, dim=0) > 0.999
    # the same prompt split as past + rest goes through the masked path
    split = CAUSAL_CHUNK + 3
    (past,), _ = model.prefill([prompts[1][:split]], [None])
    (whole,), _ = model.prefill([prompts[1][split:]], [past])
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(whole[0].float(), kvs[1][0].float(), rtol=tol, atol=tol)


def _legacy(cache):
    """HF's KV cache as per-layer (k, v) pairs, whichever cache class this transformers has."""
    if hasattr(cache, "to_legacy_cache"):
        return cache.to_legacy_cache()
    return cache
