"""Small modal dialogs: confirm, ask for a line of text, conversation settings."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Grid, Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, TextArea


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [("escape", "dismiss(False)", "Cancel")]

    def __init__(self, question: str, confirm: str = "Delete"):
        super().__init__()
        self.question, self.confirm = question, confirm

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question)
            with Horizontal(classes="buttons"):
                yield Button(self.confirm, variant="error", id="yes")
                yield Button("Cancel", id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class TextPromptScreen(ModalScreen[str | None]):
    BINDINGS = [("escape", "dismiss(None)", "Cancel")]

    def __init__(self, title: str, value: str = ""):
        super().__init__()
        self.title_text, self.value = title, value

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text)
            yield Input(value=self.value, id="value")
            with Horizontal(classes="buttons"):
                yield Button("OK", variant="primary", id="ok")
                yield Button("Cancel", id="cancel")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(self.query_one("#value", Input).value.strip() or None if event.button.id == "ok" else None)


FIELDS = [("temperature", float), ("top_p", float), ("top_k", int), ("min_p", float),
          ("repeat_penalty", float), ("max_tokens", int), ("seed", int)]


class ConversationSettingsScreen(ModalScreen[dict | None]):
    """System prompt and sampling for one conversation. Returns {'system':..., 'sampling':...}."""

    BINDINGS = [("escape", "dismiss(None)", "Cancel")]

    def __init__(self, system: str, sampling: dict):
        super().__init__()
        self.system, self.sampling = system, sampling

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label("System prompt")
            yield TextArea(self.system, id="system")
            with Grid(id="sampling-grid"):
                for name, _ in FIELDS:
                    value = self.sampling.get(name)
                    yield Label(name)
                    yield Input("" if value is None else str(value), id=f"f-{name}",
                                placeholder="random" if name == "seed" else "")
            with Horizontal(classes="buttons"):
                yield Button("Save", variant="primary", id="save")
                yield Button("Cancel", id="cancel")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id != "save":
            self.dismiss(None)
            return
        sampling = {}
        for name, kind in FIELDS:
            raw = self.query_one(f"#f-{name}", Input).value.strip()
            if not raw:
                sampling[name] = None if name == "seed" else self.sampling.get(name)
                continue
            try:
                sampling[name] = kind(raw)
            except ValueError:
                self.notify(f"{name}: {raw!r} is not a number", severity="error")
                return
        self.dismiss({"system": self.query_one("#system", TextArea).text, "sampling": sampling})
