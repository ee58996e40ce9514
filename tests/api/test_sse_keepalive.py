"""The SSE keep-alive wrapper (tandem.api.keepalive) on small async generators: comments
only in a silence longer than the interval, every event kept in order, and closing the
stream (a client going away) reaching the inner generator's clean-up."""

from __future__ import annotations

import asyncio

from tandem.api.keepalive import COMMENT, with_keepalive

INTERVAL_S = 0.05


async def _read(stream) -> list[str]:
    return [event async for event in stream]


def test_a_silence_longer_than_the_interval_gets_comments_and_no_event_is_lost_or_moved(settings):
    settings.TANDEM_API_SSE_KEEPALIVE_S = INTERVAL_S  # the wrapper's default interval

    async def events():
        yield "data: 1\n\n"
        yield "data: 2\n\n"
        await asyncio.sleep(INTERVAL_S * 8)  # the silence under test (a queue wait, an approval)
        yield "data: 3\n\n"
        yield "data: [DONE]\n\n"

    got = asyncio.run(_read(with_keepalive(events())))
    assert [e for e in got if e != COMMENT] == ["data: 1\n\n", "data: 2\n\n", "data: 3\n\n", "data: [DONE]\n\n"]
    gap = got[got.index("data: 2\n\n") + 1:got.index("data: 3\n\n")]
    assert len(gap) >= 2 and set(gap) == {COMMENT}
    # None where events follow each other: before the silence or after it.
    assert got[:2] == ["data: 1\n\n", "data: 2\n\n"] and got[-2:] == ["data: 3\n\n", "data: [DONE]\n\n"]
    assert COMMENT == ": keep-alive\n\n"


def test_a_stream_without_silence_is_unchanged():
    async def events():
        for i in range(50):
            yield f"data: {i}\n\n"

    assert asyncio.run(_read(with_keepalive(events(), every_s=5))) == [f"data: {i}\n\n" for i in range(50)]


def test_closing_the_stream_during_a_silence_cancels_the_inner_generator():
    seen: list[str] = []

    async def events():
        try:
            yield "data: 1\n\n"
            await asyncio.Event().wait()  # a wait nothing ends: only a cancellation can
            yield "never"
        except asyncio.CancelledError:
            seen.append("cancelled")  # where the reply's requests are cancelled
            raise
        finally:
            seen.append("cleaned up")

    async def client_goes_away() -> list[str]:
        stream = with_keepalive(events(), every_s=INTERVAL_S)
        got = [await anext(stream), await anext(stream), await anext(stream)]
        await stream.aclose()
        return got

    assert asyncio.run(client_goes_away()) == ["data: 1\n\n", COMMENT, COMMENT]
    assert seen == ["cancelled", "cleaned up"]


def test_cancelling_the_reading_task_cancels_the_inner_generator():
    seen: list[str] = []
    reading = asyncio.Event()

    async def events():
        try:
            reading.set()
            await asyncio.Event().wait()
            yield "never"
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def main() -> None:
        stream = with_keepalive(events(), every_s=60)
        task = asyncio.ensure_future(_read(stream))
        await reading.wait()
        task.cancel()  # what the ASGI server does when the client disconnects
        try:
            await task
        except asyncio.CancelledError:
            pass
        else:
            raise AssertionError("the read was not cancelled")
        await stream.aclose()

    asyncio.run(main())
    assert seen == ["cancelled"]


def test_closing_the_stream_between_events_closes_the_inner_generator():
    seen: list[str] = []

    async def events():
        try:
            yield "data: 1\n\n"
            yield "data: 2\n\n"
        except GeneratorExit:
            seen.append("closed")
            raise

    async def main() -> str:
        stream = with_keepalive(events(), every_s=60)
        got = await anext(stream)
        await stream.aclose()
        return got

    assert asyncio.run(main()) == "data: 1\n\n"
    assert seen == ["closed"]


def test_an_interval_of_0_turns_keep_alives_off(settings):
    settings.TANDEM_API_SSE_KEEPALIVE_S = 0

    async def events():
        yield "data: 1\n\n"
        await asyncio.sleep(0.1)
        yield "data: 2\n\n"

    assert asyncio.run(_read(with_keepalive(events()))) == ["data: 1\n\n", "data: 2\n\n"]
