"""Pick the quant levels to make from an installed model."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Label, SelectionList

LEVELS = ["F16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_0", "Q4_K_M", "Q4_0", "Q3_K_M", "Q2_K"]


class QuantizeScreen(ModalScreen[dict | None]):
    """Returns {'targets': [...], 'from_f16': bool, 'allow_requantize': bool} or None."""

    BINDINGS = [("escape", "dismiss(None)", "Cancel")]

    def __init__(self, label: str, source_quant: str):
        super().__init__()
        self.label, self.source_quant = label, source_quant

    def compose(self) -> ComposeResult:
        from edge_infer.gguf.quant_types import bits_per_weight, canonical

        src = canonical(self.source_quant)
        with Vertical(classes="dialog"):
            yield Label(f"Quantize [b]{self.label}[/b] to:")
            yield SelectionList[str](*[(f"{q}  ({bits_per_weight(q):.1f} bpw)", q) for q in LEVELS if q != src],
                                     id="q-levels")
            yield Checkbox("widen to F16 first (quantized source)", id="q-from-f16")
            yield Checkbox("allow requantize / higher precision", id="q-allow")
            with Horizontal(classes="buttons"):
                yield Button("Quantize", variant="primary", id="q-go")
                yield Button("Cancel", id="q-cancel")

    @on(Button.Pressed)
    def done(self, event: Button.Pressed) -> None:
        if event.button.id != "q-go":
            self.dismiss(None)
            return
        targets = list(self.query_one("#q-levels", SelectionList).selected)
        if not targets:
            self.notify("Pick at least one level.", severity="warning")
            return
        self.dismiss({"targets": [q for q in LEVELS if q in targets],
                      "from_f16": self.query_one("#q-from-f16", Checkbox).value,
                      "allow_requantize": self.query_one("#q-allow", Checkbox).value})
