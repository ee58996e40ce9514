"""The decode batch: the running sequences and their KV cache, stepped one token at a time.

Sequences live in capacity classes (128, 256, 512, ... positions, up to max_context).
Each class has its own preallocated cache [L, rows, 2 Hkv, capacity, D] (keys, then
values, as DecoderModel lays them out) and attends on its own: its rows read only up to
the longest sequence *in that class*. One long prompt in a batch of short chats therefore
costs its own row, not a wider cache for everyone, and a growing sequence moves alone to
the next class (one row copied) instead of the whole cache being reallocated and copied
(which at 64 rows x 640 positions was a 900 MiB stall in the middle of a stream).

Within a class, slots are compact (sequences occupy 0..n-1; a leaving sequence's slot is
refilled by the class's last one) so each class runs on plain views of its first n rows.
The batch order that `seqs`, `step()` and `remove(slot)` use is the classes' sequences
concatenated, smallest class first; removing slots in descending order keeps the lower
slots where they were.

Memory follows the batch: a class's rows double as it fills (up to max_batch) and an
idle class's cache is freed after a while.

Knows nothing of queues, threads or admission: the scheduler decides who joins and
leaves, the runner (runner.py) makes it so; this class holds the rows and runs the
decode forward + sampling.
"""

from __future__ import annotations

import torch

from .kv import KVCache
from .model import CacheGroup, DecoderModel
from .sampling import TokenLogprobs, sample
from .sequence import Sequence

_MIN_CAPACITY = 128
_IDLE_STEPS_BEFORE_FREE = 512  # steps an empty class keeps its cache (bursts come back)
_SOON_STEPS = 32  # a sequence this close to its class's end will move soon


def capacity_class(positions: int, max_context: int) -> int:
    """The smallest class (a power of two >= 128, or max_context) holding `positions`."""
    cap = _MIN_CAPACITY
    while cap < positions:
        cap *= 2
    return min(cap, max_context)


class _CapacityClass:
    def __init__(self, model: DecoderModel, capacity: int):
        self.model = model
        self.capacity = capacity
        self.seqs: list[Sequence] = []  # seqs[i] lives in row i
        self.cache = torch.empty(0)  # [L, rows, 2 Hkv, capacity, D]
        self.rows = 0
        self.idle_steps = 0

    def add(self, seq: Sequence, kv: torch.Tensor | tuple[torch.Tensor, torch.Tensor], max_batch: int,
            expected: int = 1) -> None:
        """Give `seq` a row holding `kv`: [L, 2 Hkv, n, D], or its keys and values [L, Hkv,
        n, D] each (from any device and dtype: the copy converts). `expected`: how many
        sequences are about to arrive, so a burst of them (a whole batch outgrowing the
        class below at about the same step) reallocates once, not log2 times."""
        n = len(self.seqs) + 1
        if n > self.rows:
            rows = min(
                max_batch, 1 << (max(n, len(self.seqs) + expected, 2 * self.rows, 4) - 1).bit_length()
            )
            # Not zeroed: a fresh cache of 64 rows is hundreds of MB, and zeroing it all
            # stalls the batch for tens of ms. Each row's KV is written below (and, where
            # SDPA reads past it, the rest of the row zeroed).
            cache = self.model.new_kv(rows, self.capacity, zero=False)
            if self.seqs:
                cache[:, : len(self.seqs)] = self.cache[:, : len(self.seqs)]
            self.cache, self.rows = cache, rows
        row = n - 1
        if isinstance(kv, tuple):  # keys and values straight into place, no joined copy
            k, v = kv
            length, hkv = k.shape[2], k.shape[1]
            self.cache[:, row, :hkv, :length] = k
            self.cache[:, row, hkv:, :length] = v
        else:
            length = kv.shape[2]
            self.cache[:, row, :, :length] = kv
        if self.model.decode_attention is None:
            # SDPA reads masked positions too (with weight 0, and 0 * NaN = NaN): they must
            # be finite. The decode kernel never reads past a row's position.
            self.cache[:, row, :, length:] = 0
        self.seqs.append(seq)
        self.idle_steps = 0

    def remove(self, row: int) -> Sequence:
        seq = self.seqs[row]
        last = len(self.seqs) - 1
        if row != last:
            moved = self.seqs[last]
            self.cache[:, row, :, : moved.kv_len] = self.cache[:, last, :, : moved.kv_len]
            self.seqs[row] = moved
        self.seqs.pop()
        return seq

    def group(self, start: int) -> CacheGroup:
        n = len(self.seqs)
        return CacheGroup(self.cache[:, :n], start, max(s.kv_len for s in self.seqs) + 1)


class DecodeBatch:
    def __init__(self, model: DecoderModel, *, max_batch: int, max_context: int):
        self.model = model
        self.max_batch = max_batch
        self.max_context = max_context
        self.classes: dict[int, _CapacityClass] = {}  # capacity -> class, kept sorted

    @property
    def seqs(self) -> list[Sequence]:
        """Every running sequence, in batch (slot) order."""
        return [s for c in self.classes.values() for s in c.seqs]

    @property
    def size(self) -> int:
        return sum(len(c.seqs) for c in self.classes.values())

    @property
    def kv_tokens(self) -> int:
        return sum(s.kv_len for c in self.classes.values() for s in c.seqs)

    def join(self, seq: Sequence, kv: KVCache) -> None:
        """Put a sequence into a free slot of its class, copying its prompt KV in (from
        any device and dtype: a bf16 prefill tier's KV joins an int8 model's fp32 batch)."""
        if self.size >= self.max_batch:
            raise RuntimeError("no free decode slot")
        self._class_for(seq.kv_len + 1).add(seq, (kv.k, kv.v), self.max_batch)

    def remove(self, slot: int) -> Sequence:
        """Free a slot; slots below it keep their place. The last one out frees every
        cache: an idle engine takes no steps, so idle classes would otherwise never go."""
        for c in self.classes.values():
            if slot < len(c.seqs):
                seq = c.remove(slot)
                if not self.size:
                    self.classes.clear()
                return seq
            slot -= len(c.seqs)
        raise IndexError("no such decode slot")

    def remove_seqs(self, seqs: set[Sequence]) -> list[Sequence]:
        """Free the slots of `seqs` (highest slot first, so lower ones stay valid)."""
        slots = [slot for slot, s in enumerate(self.seqs) if s in seqs]
        return [self.remove(slot) for slot in reversed(slots)]

    def step(self) -> list[tuple[Sequence, int, TokenLogprobs | None]]:
        """Feed every slot's last token, sample the next one; returns (sequence, token,
        its logprobs if the sequence asked) by slot (the order after this step's moves
        between classes)."""
        self._regroup()
        seqs = self.seqs
        dev = self.model.device
        groups, start = [], 0
        for c in self.classes.values():
            if c.seqs:
                groups.append(c.group(start))
                start += len(c.seqs)
        # Host-side lists (not device tensors) drive positions, so the only device->host
        # sync per step is reading the sampled tokens back.
        input_ids = torch.tensor([[s.tokens[-1]] for s in seqs], device=dev)  # [n, 1]
        positions = torch.tensor([s.kv_len for s in seqs], device=dev)[:, None]  # [n, 1]
        logits = self.model.forward(
            input_ids, positions, groups, torch.zeros(len(seqs), dtype=torch.long, device=dev)
        )  # [n, V]
        got = sample(logits, [s.sampling for s in seqs], [s.generator for s in seqs],
                     [s.history for s in seqs], [s.matcher for s in seqs])
        return list(zip(seqs, got.tokens.tolist(), got.logprobs, strict=True))

    def _regroup(self) -> None:
        """Move sequences whose next position no longer fits into the next class; free
        classes that stayed empty for a while."""
        for c in list(self.classes.values()):
            outgrown = [row for row, seq in enumerate(c.seqs) if seq.kv_len + 1 > c.capacity]
            if not outgrown:
                continue
            # Sequences of similar length cross a boundary within a few steps of each
            # other: the class above is sized for those about to follow.
            soon = sum(1 for s in c.seqs if s.kv_len + _SOON_STEPS > c.capacity)
            for moved, row in enumerate(reversed(outgrown)):
                seq = c.seqs[row]
                if seq.kv_len + 1 > self.max_context:
                    raise RuntimeError(
                        f"sequence of {seq.kv_len + 1} positions exceeds max_context"
                    )
                dest = self._class_for(seq.kv_len + 1)
                dest.add(seq, c.cache[:, row, :, : seq.kv_len], self.max_batch, expected=soon - moved)
                c.remove(row)
        for cap, c in list(self.classes.items()):
            if c.seqs:
                continue
            c.idle_steps += 1
            if c.idle_steps > _IDLE_STEPS_BEFORE_FREE:
                del self.classes[cap]

    def _class_for(self, positions: int) -> _CapacityClass:
        cap = capacity_class(positions, self.max_context)
        if cap not in self.classes:
            self.classes[cap] = _CapacityClass(self.model, cap)
            self.classes = dict(sorted(self.classes.items()))
        return self.classes[cap]
