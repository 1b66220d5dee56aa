"""Models whose engine process ended (a worker lost: engine/child.py) or whose reload failed
since: name -> why. /health says "degraded" and the listings "unavailable" (host/entries.py)
until a load of the model succeeds; the next request that names it tries."""

from __future__ import annotations

import threading

from edge_infer.host.resident import Resident


class Failures(dict):
    def take_failed(self, models: list[Resident]) -> list[Resident]:
        """`models` without those whose engine failed; those are recorded and closed."""
        failed = [m for m in models if m.engine is not None and m.engine.state == "failed"]
        for m in failed:
            self[m.name] = getattr(m.engine, "failure", "") or "its engine stopped"
            threading.Thread(target=m.engine.close, daemon=True).start()
        return [m for m in models if m not in failed]

    def load_failed(self, name: str, exc: BaseException) -> None:
        if name in self:  # still unavailable: the new reason
            self[name] = str(exc)
