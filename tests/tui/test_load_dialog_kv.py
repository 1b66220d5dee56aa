"""The Load dialog's KV cache choices: types, pool budget and prompt cache in the memory plan,
one-line refusals that disable Load, and the settings it hands back."""

from __future__ import annotations

import re

from textual.widgets import Button, Input, Select, Static

from edge_infer.config import EngineSettings
from edge_infer.tui.screens.load_model import LoadModelScreen

from .conftest import wait_for

SETTINGS = EngineSettings(ctx=1024, parallel=4, n_threads=2)


async def open_dialog(pilot, path, settings=SETTINGS) -> list:
    """Push the dialog on the app; returns the list its dismiss result lands in."""
    results = []
    pilot.app.push_screen(LoadModelScreen("smollm2", path, settings), results.append)
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, LoadModelScreen) and plan(pilot))
    return results


def plan(pilot) -> str:
    shown = pilot.app.screen.query("#plan")  # empty while the dialog composes
    return str(shown.first(Static).render()) if shown else ""


def pool(pilot) -> tuple[int, int]:
    """(cells, MiB) from the plan's "KV pool N cells, X MiB"."""
    m = re.search(r"KV pool (\d+) cells, (\d+) MiB", plan(pilot))
    assert m, plan(pilot)
    return int(m.group(1)), int(m.group(2))


def load_button(pilot) -> Button:
    return pilot.app.screen.query_one("#load", Button)


async def change(pilot, selector: str, value: str) -> None:
    before = plan(pilot)
    pilot.app.screen.query_one(selector).value = value
    await wait_for(pilot, lambda: plan(pilot) != before)


async def test_q8_0_types_shrink_the_kv_pool(make_app, smollm2_path):
    app = make_app(load=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_dialog(pilot, smollm2_path)
        import re

        # The prompt cache's default is auto: a share of the RAM free now (at least 256 MiB).
        auto = re.search(r"prompt cache cap (\d+) MiB", plan(pilot))
        assert "K f16, V f16" in plan(pilot) and auto and int(auto.group(1)) >= 256
        cells, f16_mib = pool(pilot)
        assert cells == 2048  # the default pool: 2 contexts of 1024
        await change(pilot, "#l-cache_type_k", "q8_0")
        await change(pilot, "#l-cache_type_v", "q8_0")
        assert "K q8_0, V q8_0" in plan(pilot)
        assert pool(pilot)[0] == cells and pool(pilot)[1] < f16_mib
        await change(pilot, "#l-prompt_cache_mib", "0")
        assert "prompt cache cap 0 MiB" in plan(pilot)


async def test_bad_budget_is_one_red_line_and_disables_load(make_app, smollm2_path):
    app = make_app(load=False)
    async with app.run_test(size=(80, 24)) as pilot:
        results = await open_dialog(pilot, smollm2_path)
        app.screen.query_one("#l-kv_budget", Input).focus()
        await pilot.press(*"lots")
        await wait_for(pilot, lambda: "--kv-budget" in plan(pilot))
        assert "'lots'" in plan(pilot) and "\n" not in plan(pilot).strip()
        assert load_button(pilot).disabled
        load_button(pilot).press()  # a disabled button does nothing
        await pilot.pause()
        assert results == [] and isinstance(app.screen, LoadModelScreen)
        # Fixed: the plan comes back with the pool it asks for, and Load is enabled again.
        await change(pilot, "#l-kv_budget", "512cells")
        assert pool(pilot)[0] == 512 and not load_button(pilot).disabled
        # A memory budget below llama.cpp's minimum pool is refused the same way.
        await change(pilot, "#l-kv_budget", "1MiB")
        assert "--kv-budget" in plan(pilot) and load_button(pilot).disabled
        await change(pilot, "#l-kv_budget", "")
        assert pool(pilot)[0] == 2048 and not load_button(pilot).disabled


async def test_quantized_v_without_flash_attention_is_refused(make_app, smollm2_path):
    app = make_app(load=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_dialog(pilot, smollm2_path, EngineSettings(ctx=1024, parallel=4, n_threads=2, flash_attn="off"))
        await change(pilot, "#l-cache_type_k", "q8_0")  # a quantized K alone is fine
        assert not load_button(pilot).disabled
        await change(pilot, "#l-cache_type_v", "q4_0")
        assert "--cache-type-v q4_0 needs flash attention" in plan(pilot) and load_button(pilot).disabled
        await change(pilot, "#l-cache_type_v", "bf16")
        assert "V bf16" in plan(pilot) and not load_button(pilot).disabled


async def test_load_hands_back_the_chosen_kv_settings(make_app, smollm2_path):
    app = make_app(load=False)
    async with app.run_test(size=(80, 24)) as pilot:
        results = await open_dialog(pilot, smollm2_path)
        await change(pilot, "#l-cache_type_k", "q8_0")
        await change(pilot, "#l-kv_budget", " 64MiB ")
        await change(pilot, "#l-prompt_cache_mib", "32")
        app.screen.query_one("#l-cache_type_k", Select).focus()
        await pilot.click("#load")  # on screen at 80x24: the dialog fits
        await wait_for(pilot, lambda: results)
        s = results[0]
        assert (s.cache_type_k, s.cache_type_v, s.kv_budget, s.prompt_cache_mib) == ("q8_0", "f16", "64MiB", 32)
        assert (s.ctx, s.parallel, s.flash_attn) == (1024, 4, "auto")
