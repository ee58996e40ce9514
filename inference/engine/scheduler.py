"""The scheduler: the one policy that decides, before every engine step, which sequences
compute and how many tokens each, for prefill, chunked prefill and decode alike.

Its output, StepPlan, is the whole contract with the runner (runner.py), which executes
a plan and decides nothing. Everything here is plain Python over Sequence objects (no
tensors), so the rules are tested as pure functions, without a model:

- admission (pick_admissions): highest priority first, then arrival; a group (tenant) at
  its cap on decode slots is passed over; otherwise the first sequence that does not fit
  (slots, KV-token budget) stops admission, so a long request is not starved by short ones;
- fair share of prefill (pick_batch): by priority, then groups in turn, the group with the
  least recent prefill work first, oldest first within a group;
- overtaking (overtakers): who may pause a running prefill forward (a group with less
  recent prefill work than every group in it, at no lower priority; once per forward);
- chunking (chunk_prompts): how many prompt tokens each admitted prompt computes in the
  next forward, within a token budget, whole prompts when nobody is decoding;
- packing (batch_by_length): prompts into forwards, similar lengths together, within the
  batch and padded-token bounds.

The Scheduler class holds the queues of one step loop (waiting, then prefilling) and
applies the rules to them; the prefill engine and the prefill worker's batcher apply the
same rules to the prompts of one call.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from .sequence import Sequence

T = TypeVar("T")


# -- the contract ---------------------------------------------------------------------


@dataclass(frozen=True)
class PrefillChunk:
    """Prompt tokens [start, start + num_tokens) of `seq`, computed after the KV of the
    `start` tokens before them (a prefix-cache hit or the sequence's earlier chunks)."""

    seq: Sequence
    start: int
    num_tokens: int

    @property
    def completes(self) -> bool:
        """The chunk ends the prompt: its last logits give the first output token."""
        return self.start + self.num_tokens == self.seq.prompt_len


@dataclass(frozen=True)
class StepPlan:
    """What one engine step computes, decided by the Scheduler, executed by the runner.

    Order of execution: `joins` enter the decode batch; `decode` runs as one forward of
    one token per row; `prefill` runs as one forward (its completed prompts join in the
    next plan). A sequence is in at most one of prefill and decode. vLLM's
    {request: num_tokens} is `num_scheduled_tokens`.
    """

    # Admitted this step: they now hold a decode slot and their KV-token reservation.
    admitted: tuple[Sequence, ...] = ()
    # Admitted sequences that the tokens they already have end (a handed-over first
    # token that is a stop token, max_tokens=1, no room in the context), with the reason:
    # they never join the batch.
    finished: tuple[tuple[Sequence, str], ...] = ()
    # Sequences whose prompt KV is complete (handed over by a prefill worker, or computed
    # by an earlier step's prefill, whose first token is out): the runner copies it into
    # the batch cache before the decode forward.
    joins: tuple[Sequence, ...] = ()
    # Prompt pieces for one forward, in the order their rows are laid out.
    prefill: tuple[PrefillChunk, ...] = ()
    # Every sequence in the decode batch after `joins`: one new token each.
    decode: tuple[Sequence, ...] = ()

    @property
    def num_scheduled_tokens(self) -> dict[str, int]:
        """{request_id: tokens computed this step}."""
        out = {c.seq.request_id: c.num_tokens for c in self.prefill}
        out.update((s.request_id, 1) for s in self.decode)
        return out

    @property
    def empty(self) -> bool:
        return not (self.finished or self.prefill or self.decode)


@dataclass(frozen=True)
class SchedulerConfig:
    max_batch: int  # decode slots
    kv_token_budget: int  # KV tokens reserved by sequences holding slots
    max_context: int
    prefill_max_batch: int = 8  # prompts per prefill forward
    prefill_max_tokens: int = 8192  # prompt tokens per forward (whole prompts)
    prefill_chunk: int = 128  # prompt tokens per forward while sequences decode (chunked)
    chunked_prefill: bool = False


# -- the rules (pure functions) -------------------------------------------------------


def pick_admissions(
    waiting: list[Sequence], *, free_slots: int, free_tokens: int, group_active: Counter[str | None],
    max_context: int,
) -> list[Sequence]:
    """Which waiting sequences join now: highest priority first, then arrival order.

    A sequence whose group is at its cap is passed over (others go first). Otherwise the
    first one that does not fit (slots or budget) stops admission, so a long request is
    not starved by a stream of short ones behind it.
    """
    chosen: list[Sequence] = []
    active = Counter(group_active)
    for seq in sorted(waiting, key=lambda s: (-s.priority, s.order)):
        cap = seq.group_max_slots
        if seq.group is not None and cap is not None and active[seq.group] >= cap:
            continue
        need = seq.reservation(max_context)
        if free_slots < 1 or need > free_tokens:
            break
        chosen.append(seq)
        free_slots -= 1
        free_tokens -= need
        active[seq.group] += 1
    return chosen


class Queued(Protocol):
    """What the fair-share rules read of a waiting prompt."""

    order: int  # arrival
    group: object  # the tenant (None: no group)
    priority: int  # higher first


Q = TypeVar("Q", bound=Queued)


def pick_batch(waiting: list[Q], max_batch: int, usage: dict | None = None) -> list[Q]:
    """Up to max_batch of `waiting`: by priority, then one per group in turn (the group
    with the least `usage` first, then the one whose oldest request is oldest), oldest
    first within a group."""
    usage = usage or {}
    chosen: list[Q] = []
    for prio in sorted({w.priority for w in waiting}, reverse=True):
        groups: dict[object, deque[Q]] = {}
        for w in sorted((x for x in waiting if x.priority == prio), key=lambda x: x.order):
            groups.setdefault(w.group, deque()).append(w)
        # sorted() is stable: equal usage keeps the order of each group's oldest request.
        queues = sorted(groups.values(), key=lambda q: usage.get(q[0].group, 0.0))
        while queues and len(chosen) < max_batch:
            for q in list(queues):
                chosen.append(q.popleft())
                if not q:
                    queues.remove(q)
                if len(chosen) == max_batch:
                    break
        if len(chosen) == max_batch:
            break
    return chosen


def overtakers(waiting: list[Q], running: list[Q], usage: dict) -> list[Q]:
    """Those of `waiting` that may pause the forward running `running` to go first: not
    of a group in it, at no lower priority than it, and of a group that has had less
    prefill work lately (`usage`) than every group in it. A flooding tenant never pauses
    a quiet one's forward; the caller lets a forward be overtaken once, so none starves."""
    busy = {w.group for w in running}
    least_busy = min(usage.get(g, 0.0) for g in busy)
    priority = max(w.priority for w in running)
    return [w for w in waiting if w.group not in busy and w.priority >= priority
            and usage.get(w.group, 0.0) < least_busy]


def chunk_prompts(remaining: list[int], *, budget: int, max_batch: int, chunked: bool) -> list[int]:
    """Prompt tokens each prompt (in order, with `remaining` tokens left) computes in the
    next forward; the list stops at the last prompt that takes any.

    chunked: at most `budget` tokens in all, a prompt's piece cut to fit (the running
    streams wait for this forward: the budget bounds their stall). Whole prompts
    otherwise, while they fit the budget; a first prompt over it still runs, alone.
    """
    takes: list[int] = []
    for left in remaining:
        take = min(left, budget) if chunked else left
        if takes and (take > budget or len(takes) >= max_batch):
            break
        takes.append(take)
        budget -= take
        if budget <= 0:
            break
    return takes


def batch_by_length(items: list[T], length: Callable[[T], int], *, max_batch: int,
                    max_padded_tokens: int) -> list[list[T]]:
    """Items into forwards, shortest first, similar lengths together (less padding):
    at most max_batch per forward and max_padded_tokens (rows x longest) per forward,
    though a single item over that bound still runs, alone."""
    batches: list[list[T]] = []
    current: list[T] = []
    for it in sorted(items, key=length):
        longest = length(it)  # sorted: the newest item is the longest
        if current and (len(current) >= max_batch or longest * (len(current) + 1) > max_padded_tokens):
            batches.append(current)
            current = []
        current.append(it)
    if current:
        batches.append(current)
    return batches


# -- the queues of one step loop ------------------------------------------------------


@dataclass
class Scheduler:
    """Waiting sequences, then prompts being prefilled, then prompts prefilled (first
    token out) that join the batch in the next plan; `schedule` makes that plan.

    A sequence holds a decode slot and its KV reservation from admission on: a prompt
    being prefilled never waits for a slot once its KV is done. `lookup` (optional) is
    called on each admitted prompt before it is chunked: a prefix-cache hit sets the
    sequence's kv and prefilled count, so its first chunk starts after the hit.
    """

    config: SchedulerConfig
    eos_ids: frozenset[int] = frozenset()
    lookup: Callable[[Sequence], None] | None = None
    waiting: list[Sequence] = field(default_factory=list)
    prefilling: list[Sequence] = field(default_factory=list)
    prefilled: list[Sequence] = field(default_factory=list)

    def add(self, seqs: Iterable[Sequence]) -> None:
        self.waiting.extend(seqs)

    def take(self, request_ids: set[str]) -> list[Sequence]:
        """Remove (and return) the sequences not yet in the batch with these ids."""
        out = [s for s in self.pending if s.request_id in request_ids]
        for queue in (self.waiting, self.prefilling, self.prefilled):
            queue[:] = [s for s in queue if s.request_id not in request_ids]
        return out

    def drop(self, seq: Sequence) -> None:
        """A prefilling sequence leaves (it failed, or its first token ended it)."""
        if seq in self.prefilling:
            self.prefilling.remove(seq)

    def done_prefilling(self, seq: Sequence) -> None:
        """Its prompt's KV is complete and its first token out: it joins next step."""
        self.prefilling.remove(seq)
        self.prefilled.append(seq)

    @property
    def pending(self) -> list[Sequence]:
        """Every sequence not in the decode batch, in queue order."""
        return [*self.waiting, *self.prefilling, *self.prefilled]

    @property
    def pending_reserved(self) -> int:
        return sum(s.reserved for s in (*self.prefilling, *self.prefilled))

    def has_work(self) -> bool:
        return bool(self.waiting or self.prefilling or self.prefilled)

    def schedule(self, running: list[Sequence]) -> StepPlan:
        """The next step for a decode batch holding `running` (in batch order)."""
        cfg = self.config
        holders = [*running, *self.prefilling, *self.prefilled]  # everything holding slots and budget
        admitted = pick_admissions(
            self.waiting,
            free_slots=cfg.max_batch - len(holders),
            free_tokens=cfg.kv_token_budget - sum(s.reserved for s in holders),
            group_active=Counter(s.group for s in holders),
            max_context=cfg.max_context,
        )
        finished: list[tuple[Sequence, str]] = []
        joins, self.prefilled = self.prefilled, []
        for seq in admitted:
            self.waiting.remove(seq)
            seq.reserved = seq.reservation(cfg.max_context)
            if seq.prompt is None:  # its prompt's KV came with it
                reason = seq.done_before_joining(self.eos_ids, cfg.max_context)
                if reason is not None:
                    finished.append((seq, reason))
                else:
                    joins.append(seq)
                continue
            if self.lookup is not None:
                self.lookup(seq)
            self.prefilling.append(seq)
        # Chunks bound the stall a prefill imposes on running streams; with none running
        # there is nothing to protect, and whole prompts finish sooner.
        decoding = [*running, *joins]
        chunked = cfg.chunked_prefill and bool(decoding)
        takes = chunk_prompts([s.prompt_len - s.prefilled for s in self.prefilling],
                              budget=cfg.prefill_chunk if chunked else cfg.prefill_max_tokens,
                              max_batch=cfg.prefill_max_batch, chunked=chunked)
        prefill = tuple(PrefillChunk(s, s.prefilled, n) for s, n in zip(self.prefilling, takes, strict=False))
        return StepPlan(admitted=tuple(admitted), finished=tuple(finished), joins=tuple(joins), prefill=prefill,
                        decode=tuple(decoding))
