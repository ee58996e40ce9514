"""Picking up a reply whose worker died: read back what its stream already holds (the
token ids and texts, dense from index 0), bring a fresh detokenizer to the same state,
and tell whether the reply had in fact ended (its terminal record is in the stream, or
its row is final though its stream was never closed: the record is written now)."""

from __future__ import annotations

from dataclasses import dataclass

from ..text.detokenize import IncrementalDetokenizer
from ..wire import streams
from ..wire.spec import RequestSpec
from ..worker.runtime import Runtime
from . import outcomes


@dataclass(frozen=True)
class Resumption:
    token_ids: list[int]  # every token already streamed, index 0 first
    texts: list[str]  # their texts, as streamed
    first_ts: float | None  # when index 0 was streamed
    stop_hit: bool  # the streamed text already reached a stop string: the reply ends here


def resumption(rt: Runtime, spec: RequestSpec, detok: IncrementalDetokenizer) -> Resumption | None:
    """What the stream holds of the reply, with `detok` advanced past it; None when the
    reply had ended (nothing more to do)."""
    done = streams.progress(rt.client, spec.request_id)
    if done.terminal is not None:
        return None
    final = outcomes.final_record(request_id=spec.request_id)
    if final is not None:
        streams.publish(rt.client, spec.request_id, [final])
        return None
    raw = "".join(detok.push(t) for t in done.token_ids)
    # A stop string cuts the text it ends (follower._apply_stop), so look in the raw text.
    stop_hit = any(s and s in raw for s in spec.sampling.stop)
    return Resumption(token_ids=done.token_ids, texts=done.texts, first_ts=done.first_ts, stop_hit=stop_hit)
