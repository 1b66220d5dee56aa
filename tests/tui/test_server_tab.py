"""Start the API from the Server tab and call it with the official openai client."""

import asyncio

from textual.widgets import DataTable, Input, RadioButton, Static

from .conftest import host_rows, toasts, wait_for, wait_loaded


async def _start(app, pilot, **fields):
    await pilot.press("f3")
    await pilot.pause()
    for name, value in fields.items():
        app.query_one(f"#{name}", Input).value = value
    app.query_one("#start-server").press()
    pane = app.query_one("#server-pane")
    await wait_for(pilot, lambda: pane.server is not None)
    await wait_for(pilot, lambda: "serving" in status(app))
    return pane


def status(app) -> str:
    return str(app.query_one("#server-status", Static).render())


async def _stop(app, pilot):
    app.query_one("#stop-server").press()
    await wait_for(pilot, lambda: app.query_one("#server-pane").server is None)
    await wait_for(pilot, lambda: status(app) == "Server stopped.")
    assert str(app.query_one("#curl-example", Static).render()) == ""


async def test_server_tab_serves_the_loaded_engine_to_the_openai_client(make_app):
    import openai

    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_loaded(pilot, app)
        pane = await _start(app, pilot, port="0")
        assert status(app) == f"● serving {pane.server.address}" and pane.server.address.startswith("http://127.0.0.1:")
        assert "curl http://127.0.0.1:" in str(app.query_one("#curl-example").render())
        client = openai.OpenAI(base_url=pane.server.address, api_key="unused")
        reply = await asyncio.to_thread(client.chat.completions.create, model=app.host.get().name,
                                        messages=[{"role": "user", "content": "Say hi."}], max_tokens=8)
        assert reply.choices[0].message.content and reply.usage.completion_tokens > 0
        await wait_for(pilot, lambda: app.query_one("#request-log", DataTable).row_count >= 1)
        row = app.query_one("#request-log", DataTable).get_row_at(0)
        assert "POST /v1/chat/completions" in str(row[1]) and str(row[2]) == "200" and str(row[3]) != "-"
        await _stop(app, pilot)
        # A restarted server's first request shows up too (its log starts empty).
        pane = await _start(app, pilot, port="0")
        client = openai.OpenAI(base_url=pane.server.address, api_key="unused")
        await asyncio.to_thread(client.models.list)
        await wait_for(pilot, lambda: app.query_one("#request-log", DataTable).row_count >= 2)
        assert "GET /v1/models" in str(app.query_one("#request-log", DataTable).get_row_at(1)[1])
        await _stop(app, pilot)


async def test_server_tab_on_a_unix_socket(make_app, tmp_path):
    import httpx
    import openai

    sock = tmp_path / "ei.sock"
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_loaded(pilot, app)
        app.query_one("#use-socket", RadioButton).value = True
        await _start(app, pilot, socket=str(sock))
        assert status(app) == f"● serving unix:{sock}"
        assert f"--unix-socket {sock}" in str(app.query_one("#curl-example", Static).render())
        assert (sock.stat().st_mode & 0o777) == 0o600
        http = httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)))
        client = openai.OpenAI(base_url="http://localhost/v1", api_key="unused", http_client=http)
        models = await asyncio.to_thread(client.models.list)
        assert app.host.get().name in [m.id for m in models.data]
        await _stop(app, pilot)
    assert not sock.exists()


async def _select(app, pilot, name):
    table = app.query_one("#host-models", DataTable)
    table.focus()
    names = list(host_rows(app))
    table.move_cursor(row=names.index(name))
    await pilot.pause()


async def test_server_tab_lists_two_loaded_models_and_unloads_pins_and_loads_by_key(make_app, gemma3_path,
                                                                                    smol_store):
    from edge_infer.host import Budget

    app = make_app()  # SmolLM2 (by path) is the default model
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await wait_loaded(pilot, app)
        smol = app.host.current.name
        # Gemma 3 loads beside it (the host holds both): it becomes the default.
        await asyncio.to_thread(app.host.load, str(gemma3_path), app.default_settings)
        gemma = app.host.current.name
        await pilot.press("f3")
        # A refresh that ran while load() was under way may show Gemma resident but not yet the
        # default (the host makes it the default once it is loaded): wait for both.
        await wait_for(pilot, lambda: host_rows(app).get(gemma, {}).get("state") == "● loaded"
                       and host_rows(app)[gemma]["default"] == "yes")
        rows = host_rows(app)
        assert rows[smol]["state"] == "● loaded" and rows[gemma]["default"] == "yes" and rows[smol]["default"] == ""
        assert rows[smol]["ram"].endswith(("MiB", "GiB")) and rows[gemma]["active"] == "0" and rows[smol]["pinned"] == ""
        assert rows["smollm2"]["state"] == "unloaded"  # installed, not loaded: a request would load it
        assert "2 loaded" in str(app.query_one("#host-models-title").render())

        await _select(app, pilot, smol)
        await pilot.press("p")  # pin
        await wait_for(pilot, lambda: host_rows(app)[smol]["pinned"] == "yes")
        assert host_rows(app)[smol]["keep"] == "pinned" and app.host.find(smol).pinned
        await pilot.press("d")  # make default
        await wait_for(pilot, lambda: host_rows(app)[smol]["default"] == "yes")
        assert app.host.current.name == smol and host_rows(app)[gemma]["default"] == ""
        await wait_for(pilot, lambda: app.sub_title.startswith(smol))  # the title bar follows
        await pilot.press("p")  # unpin
        await wait_for(pilot, lambda: host_rows(app)[smol]["pinned"] == "")

        await _select(app, pilot, gemma)
        await pilot.press("u")  # unload: it was loaded by path, not installed, so its row goes
        await wait_for(pilot, lambda: gemma not in host_rows(app))
        assert app.host.names() == [smol]

        # A model that does not fit is an error toast, and the app goes on.
        app.host.budget = Budget(ram=1 << 20)
        await _select(app, pilot, "smollm2")
        await pilot.press("l")
        await wait_for(pilot, lambda: any("needs" in t for t in toasts(app, "Cannot load smollm2")))
        assert host_rows(app)["smollm2"]["state"] == "unloaded"
        app.host.budget = Budget(ram=1 << 40)
        await pilot.press("l")  # load the installed one by key
        await wait_for(pilot, lambda: host_rows(app)["smollm2"]["state"] == "● loaded")
        assert sorted(app.host.names()) == sorted([smol, "smollm2"])
        # The Models tab marks it loaded too, though it is not the default model.
        from edge_infer.tui.widgets.installed import InstalledModels

        installed = app.query_one(InstalledModels).query_one("#installed", DataTable)
        await wait_for(pilot, lambda: str(installed.get_row_at(0)[-1]) == "● loaded")
