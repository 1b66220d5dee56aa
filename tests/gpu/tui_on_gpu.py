"""Run the app on the software GPU in this (child) process: one chat reply, then the Stats
tab. Prints one JSON line for tests/gpu/test_faces.py. Usage: tui_on_gpu.py MODEL DATA_DIR"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from edge_infer.config import EngineSettings  # noqa: E402
from edge_infer.tui.app import EdgeInferApp  # noqa: E402
from edge_infer.tui.conversations import ConversationStore  # noqa: E402
from edge_infer.tui.widgets.chat import ChatPane, MessageView  # noqa: E402
from tests.tui.conftest import wait_for  # noqa: E402
from tests.tui.test_chat import send  # noqa: E402


async def main(model: str, data: Path) -> dict:
    app = EdgeInferApp(model, EngineSettings(ctx=1024, parallel=2, n_threads=2),
                       conversations=ConversationStore(data / "conversations"))
    async with app.run_test(size=(110, 32)) as pilot:
        await wait_for(pilot, lambda: app.host.ready, timeout=300)
        chat = app.query_one(ChatPane)
        chat.current.sampling.update(max_tokens=12, temperature=0.0)
        await send(pilot, "What is the capital of France?")
        await wait_for(pilot, lambda: len(app.query(MessageView)) == 2, timeout=300)
        await wait_for(pilot, lambda: chat.stream is None and app.query(MessageView).last().message.stats,
                       timeout=300)
        reply = app.query(MessageView).last().message
        await pilot.press("f4")
        await pilot.pause(1.0)
        stats = str(app.query_one("#stats-model").render())
        placement = app.host.current.engine.placement
        return {"reply": reply.content, "stats_text": stats, "n_gpu_layers": placement.n_gpu_layers}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], Path(sys.argv[2])))))
