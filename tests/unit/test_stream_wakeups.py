"""RequestStream's async side: the engine thread's events reach every consumer, and the loop is
woken once for all the events that arrive before it runs (no llama.cpp)."""

import asyncio
import threading

from edge_infer.engine.stream import FinishEvent, RequestStream, TokenEvent


def test_one_wake_up_carries_an_engine_steps_events_for_every_stream():
    async def main():
        loop = asyncio.get_running_loop()
        wake_ups = []
        real = loop.call_soon_threadsafe
        loop.call_soon_threadsafe = lambda callback, *args: (wake_ups.append(callback), real(callback, *args))[1]
        streams = [RequestStream(str(i), lambda: None) for i in range(8)]

        async def consume(stream):
            return [event async for event in stream]

        consumers = [asyncio.create_task(consume(s)) for s in streams]
        await asyncio.sleep(0)  # each consumer registers its wake-up and waits

        def engine_step(final: bool):  # a token and an accepted draft token for each stream
            for s in streams:
                s.put(TokenEvent(1, "a"))
                s.put(TokenEvent(2, "b"))
                if final:
                    s.put(FinishEvent("stop"))

        for final in (False, True):
            # the engine thread puts a whole step while this loop is busy (joining it here)
            engine = threading.Thread(target=engine_step, args=(final,))
            engine.start()
            engine.join()
            await asyncio.sleep(0.01)
        got = await asyncio.gather(*consumers)
        return wake_ups, got

    wake_ups, got = asyncio.run(main())
    assert len(wake_ups) == 2  # one per step, not one per event (40)
    for events in got:
        assert [e.text for e in events if isinstance(e, TokenEvent)] == ["a", "b", "a", "b"]
        assert isinstance(events[-1], FinishEvent)


def test_events_put_after_the_loop_closed_are_dropped_quietly():
    stream = RequestStream("x", lambda: None)

    async def first_event():
        async for event in stream:
            return event

    async def main():
        task = asyncio.create_task(first_event())
        await asyncio.sleep(0)
        stream.put(TokenEvent(1, "a"))
        return await task

    assert asyncio.run(main()).text == "a"
    stream.put(TokenEvent(2, "b"))  # the consumer's loop is closed: no error for the engine
    stream.put(FinishEvent("stop"))
