"""Pick the model a conversation chats with: the host's loaded models and the installed
ones (those load when the next message is sent). Returns the chosen model's name."""

from __future__ import annotations

from rich.markup import escape
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from edge_infer.units import human_bytes


def describe(entry: dict) -> str:
    if "ram_bytes" not in entry:  # installed, not in memory: unloaded, or unavailable since its engine failed
        size = entry.get("size_bytes")
        state = "not loaded" if entry["state"] == "unloaded" else escape(entry["state"])
        why = f" · {escape(entry['error'][:120])}" if entry.get("error") else ""
        return f"{escape(entry['name'])}  [dim]· {state}{f' · {human_bytes(size)} file' if size else ''}{why}[/dim]"
    tags = [entry["state"], human_bytes(entry["ram_bytes"])] + (["default"] if entry.get("default") else [])
    return f"{escape(entry['name'])}  [dim]· {' · '.join(tags)}[/dim]"


class ModelPickerScreen(ModalScreen[str | None]):
    BINDINGS = [("escape", "dismiss(None)", "Cancel")]

    def __init__(self, entries: list[dict], current: str | None):
        super().__init__()
        self.entries, self.current = entries, current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label("Model for this conversation  [dim](Enter picks · Esc cancels)[/dim]")
            yield OptionList(*(Option(describe(e), id=str(i)) for i, e in enumerate(self.entries)),
                             id="model-options")

    def on_mount(self) -> None:
        options = self.query_one("#model-options", OptionList)
        names = [e["name"] for e in self.entries]
        options.highlighted = names.index(self.current) if self.current in names else 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.entries[int(event.option.id)]["name"])
