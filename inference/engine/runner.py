"""The batch runner: the running decode batch and its KV cache, one step at a time.

Owns a preallocated per-slot KV cache [L, rows, 2 Hkv, capacity, D] (keys, then values,
as DecoderModel lays them out) and the sequences in its slots. Slots are kept compact
(sequences occupy 0..n-1; a leaving sequence's slot is refilled by the last one) so a
step runs on plain views of the first n rows, with no gather.

Memory follows the batch rather than the worst case: capacity (positions per slot)
follows the longest sequence in flight in steps of _CAPACITY_STEP, growing and shrinking
with it, and rows double up to max_batch as the batch grows. A tight capacity also keeps
attention fast: a cache twice as wide as the sequences in it makes attention ~25% slower
on a CPU (more stride between the slots it streams).

Knows nothing of queues, threads or admission: the decode and colocated engines decide
who joins and leaves; this class makes it so and runs the forward + sampling.
"""

from __future__ import annotations

import torch

from .kv import KVCache
from .model import DecoderModel
from .sampling import sample_tokens
from .sequence import Sequence

_CAPACITY_STEP = 64


class BatchRunner:
    def __init__(self, model: DecoderModel, *, max_batch: int, max_context: int):
        self.model = model
        self.max_batch = max_batch
        self.max_context = max_context
        self.seqs: list[Sequence] = []  # seqs[i] lives in slot i
        self.capacity = 0  # positions per slot
        self.rows = 0  # slots allocated, up to max_batch
        self.cache = torch.empty(0)  # [L, rows, 2 Hkv, capacity, D]
        self._ensure_room(1, min(_CAPACITY_STEP, max_context))

    @property
    def size(self) -> int:
        return len(self.seqs)

    @property
    def kv_tokens(self) -> int:
        return sum(s.kv_len for s in self.seqs)

    def join(self, seq: Sequence, kv: KVCache) -> None:
        """Put a sequence into the next free slot, copying its prompt KV into the cache."""
        if self.size >= self.max_batch:
            raise RuntimeError("no free decode slot")
        slot = self.size
        n = kv.length
        self._ensure_room(slot + 1, max(s.kv_len for s in [*self.seqs, seq]) + 1)
        dev, dt, hkv = self.model.device, self.model.dtype, self.model.shape.num_kv_heads
        self.cache[:, slot, :hkv, :n] = kv.k.to(device=dev, dtype=dt, non_blocking=True)
        self.cache[:, slot, hkv:, :n] = kv.v.to(device=dev, dtype=dt, non_blocking=True)
        self.seqs.append(seq)

    def remove(self, slot: int) -> Sequence:
        """Free a slot; the last sequence moves into it so slots stay 0..n-1."""
        seq = self.seqs[slot]
        last = self.size - 1
        if slot != last:
            moved = self.seqs[last]
            n = moved.kv_len
            self.cache[:, slot, :, :n] = self.cache[:, last, :, :n]
            self.seqs[slot] = moved
        self.seqs.pop()
        return seq

    def step(self) -> list[int]:
        """Feed every slot's last token, sample the next one; returns them by slot."""
        n = self.size
        dev = self.model.device
        # Host-side lists (not device tensors) drive positions, so the only device->host
        # sync per step is reading the sampled tokens back.
        lengths = [s.kv_len for s in self.seqs]  # the fed token's position, per slot
        kv_len = max(lengths) + 1
        self._ensure_room(n, kv_len)
        input_ids = torch.tensor([[s.tokens[-1]] for s in self.seqs], device=dev)  # [n, 1]
        positions = torch.tensor(lengths, device=dev)[:, None]  # [n, 1]
        logits = self.model.forward(
            input_ids,
            positions,
            self.cache[:, :n],  # [L, n, 2 Hkv, capacity, D] view
            kv_len,
            torch.zeros(n, dtype=torch.long, device=dev),
        )  # [n, V]
        tokens = sample_tokens(logits, [s.sampling for s in self.seqs], [s.generator for s in self.seqs])
        return tokens.tolist()

    def _ensure_room(self, rows: int, positions: int) -> None:
        """Room for `rows` slots of `positions` positions each. Positions get up to two
        steps of slack, so a growing batch reallocates (a full copy) at most once per
        _CAPACITY_STEP steps; rows double, so joins reallocate log2(max_batch) times."""
        if positions > self.max_context:
            raise RuntimeError(f"sequence of {positions} positions exceeds max_context {self.max_context}")
        too_small = positions > self.capacity or rows > self.rows
        too_big = self.capacity - positions > 3 * _CAPACITY_STEP
        if not (too_small or too_big):
            return
        steps = -(-positions // _CAPACITY_STEP) + 1
        new_cap = min(self.max_context, steps * _CAPACITY_STEP)
        new_rows = min(self.max_batch, max(8, 1 << (max(rows, self.size) - 1).bit_length()))
        cache = self.model.new_kv(new_rows, new_cap)
        keep = min(self.capacity, new_cap)
        if keep and self.size:
            cache[:, : self.size, :, :keep] = self.cache[:, : self.size, :, :keep]
        self.cache, self.capacity, self.rows = cache, new_cap, new_rows
