"""RequestStream's async side: the engine thread's events reach every consumer, and the loop is
woken once for all the events that arrive before it runs (no llama.cpp)."""

import asyncio
import gc
import threading
import weakref

from edge_infer.engine.stream import FinishEvent, RequestStream, TokenEvent


def eight_streams_through_two_engine_steps(loop_runs_between_puts: bool):
    """(the loop's wake-up calls, each consumer's events)"""
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
        loop_ran = threading.Event()

        def put(stream, event):
            stream.put(event)
            if loop_runs_between_puts:  # as when the engine releases the GIL to sample the next one
                loop.call_soon_threadsafe(loop_ran.set)
                loop_ran.wait(5)
                loop_ran.clear()

        def engine_step(final: bool):  # a token and an accepted draft token for each stream
            for s in streams:
                put(s, TokenEvent(1, "a"))
                put(s, TokenEvent(2, "b"))
                if final:
                    put(s, FinishEvent("stop"))

        for final in (False, True):
            if loop_runs_between_puts:
                await asyncio.to_thread(engine_step, final)
            else:  # the engine thread puts a whole step while this loop is busy (joining it here)
                engine = threading.Thread(target=engine_step, args=(final,))
                engine.start()
                engine.join()
            await asyncio.sleep(0.01)
        got = await asyncio.gather(*consumers)
        return [w for w in wake_ups if getattr(w, "__name__", "") == "_set_pending"], got  # not to_thread's own

    wake_ups, got = asyncio.run(main())
    for events in got:
        assert [e.text for e in events if isinstance(e, TokenEvent)] == ["a", "b", "a", "b"]
        assert isinstance(events[-1], FinishEvent)
    return wake_ups


def test_each_event_wakes_the_loop_when_it_runs_between_them():
    assert len(eight_streams_through_two_engine_steps(loop_runs_between_puts=True)) == 40


def test_events_that_arrive_before_the_loop_runs_share_one_wake_up():
    assert len(eight_streams_through_two_engine_steps(loop_runs_between_puts=False)) == 2


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


def test_a_closed_loop_is_not_kept_alive_by_its_wake_ups():
    stream = RequestStream("x", lambda: None)
    loops = []

    async def main():
        loops.append(weakref.ref(asyncio.get_running_loop()))
        async for _ in stream:
            return

    async def run():
        task = asyncio.create_task(main())
        await asyncio.sleep(0)
        stream.put(TokenEvent(1, "a"))
        await task

    asyncio.run(run())
    stream.put(TokenEvent(2, "b"))  # after the loop closed: dropped
    del stream
    gc.collect()
    assert loops[0]() is None
