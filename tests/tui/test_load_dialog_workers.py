"""The Load dialog with workers: the plan asks them for their memory and shows where the
layers go; a worker that does not answer is one red line that disables Load."""

from __future__ import annotations

from tests.remote.conftest import free_port
from tests.rpc.conftest import Worker, require_rpc_plugin

from .test_load_dialog_kv import SETTINGS, change, load_button, open_dialog, plan
from .conftest import wait_for


async def test_the_plan_places_layers_on_the_workers_given(make_app, smollm2_path):
    require_rpc_plugin()
    a, b = Worker(), Worker()
    try:
        app = make_app(load=False)
        async with app.run_test(size=(80, 24)) as pilot:
            results = await open_dialog(pilot, smollm2_path, SETTINGS)
            await change(pilot, "#l-ctx", "512")
            await change(pilot, "#l-parallel", "1")
            pilot.app.screen.query_one("#l-rpc").value = f"{a.endpoint},{b.endpoint}"
            await wait_for(pilot, lambda: "RPC1" in plan(pilot))
            assert "CPU: 0 layers" in plan(pilot) and not load_button(pilot).disabled
            dead = free_port()
            pilot.app.screen.query_one("#l-rpc").value = f"127.0.0.1:{dead}"
            await wait_for(pilot, lambda: "does not answer" in plan(pilot))
            assert f"worker 127.0.0.1:{dead} does not answer" in plan(pilot) and load_button(pilot).disabled
            pilot.app.screen.query_one("#l-rpc").value = a.endpoint
            await wait_for(pilot, lambda: "RPC0" in plan(pilot) and "does not answer" not in plan(pilot))
            await pilot.click("#load")
            await wait_for(pilot, lambda: results)
            assert results[0].rpc == (a.endpoint,)
    finally:
        a.kill(), b.kill()
