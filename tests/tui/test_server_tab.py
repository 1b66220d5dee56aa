"""Start the API from the Server tab and call it with the official openai client."""

import asyncio

from textual.widgets import DataTable, Input, RadioButton, Static

from .conftest import wait_for


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
        await wait_for(pilot, lambda: app.host.ready)
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
        await wait_for(pilot, lambda: app.host.ready)
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
