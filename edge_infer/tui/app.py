"""edge-infer's Textual app: four tabs over one in-process model host.

Models load in a worker thread; chat replies stream in async workers; the Stats
tab polls snapshots. Nothing blocking runs on the UI loop.
"""

from __future__ import annotations

from functools import partial

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.command import Hit, Hits, Provider
from textual.widgets import Footer, Header, TabbedContent, TabPane

from edge_infer.config import EngineSettings, serving_slots_default
from edge_infer.host import ModelHost
from edge_infer.tui.conversations import ConversationStore
from edge_infer.tui.widgets.chat import ChatPane
from edge_infer.tui.widgets.host_models import HostModels
from edge_infer.tui.widgets.models import ModelsPane
from edge_infer.tui.widgets.server import ServerPane
from edge_infer.tui.widgets.stats import StatsPane

TABS = [("chat", "Chat"), ("models", "Models"), ("server", "Server"), ("stats", "Stats")]


class EdgeInferCommands(Provider):
    """Command palette entries: switch tabs, chat actions, server."""

    async def search(self, query: str) -> Hits:
        app = self.app
        entries = [(f"Show {title}", partial(app.action_show_tab, tab), f"Switch to the {title} tab")
                   for tab, title in TABS]
        entries += [
            ("New chat", lambda: app.run_chat_action("new_chat"), "Start a new conversation"),
            ("Conversation settings", lambda: app.run_chat_action("settings"), "System prompt and sampling"),
            ("Rename conversation", lambda: app.run_chat_action("rename"), "Give this chat a name"),
            ("Regenerate reply", lambda: app.run_chat_action("regenerate"), "Answer the last message again"),
            ("Switch model", lambda: app.run_chat_action("pick_model"), "The model this conversation uses"),
        ]
        matcher = self.matcher(query)
        for name, callback, help_text in entries:
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)


def tui_models_config():
    """(the models config, None) or (an empty one, why the file was not used): the app opens
    either way and says why."""
    from edge_infer.errors import EdgeInferError
    from edge_infer.host.model_config import ModelsConfig, load_models_config
    from edge_infer.paths import models_config_path
    from edge_infer.remote import RemoteModels

    try:
        config = load_models_config(models_config_path())
        RemoteModels.from_config(config)  # its keys are readable
        return config, None
    except EdgeInferError as exc:
        return ModelsConfig(), str(exc)


class EdgeInferApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "edge-infer"
    COMMANDS = App.COMMANDS | {EdgeInferCommands}
    # priority: F-keys switch tabs even while the chat input has focus.
    BINDINGS = [Binding(f"f{i + 1}", f"show_tab('{tab}')", title, priority=True) for i, (tab, title) in enumerate(TABS)] + [
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(self, model: str | None = None, settings: EngineSettings | None = None,
                 conversations: ConversationStore | None = None, load_model: bool = True):
        super().__init__()
        self.model_spec = model
        self.default_settings = settings or EngineSettings.from_env(parallel=serving_slots_default())
        self.conversations = conversations or ConversationStore()
        # The models config as `serve` reads it: per-model settings and remote models.
        config, self.config_error = tui_models_config()
        self.host = ModelHost(settings=self.default_settings, config=config)  # also for models loaded on demand
        self._load_on_start = load_model

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(initial="chat", id="tabs"):
            with TabPane("Chat", id="chat"):
                yield ChatPane(self.conversations, self.host, id="chat-pane")
            with TabPane("Models", id="models"):
                yield ModelsPane(self.host, self.default_settings, id="models-pane")
            with TabPane("Server", id="server"):
                yield ServerPane(self.host, id="server-pane")
            with TabPane("Stats", id="stats"):
                yield StatsPane(self.host, id="stats-pane")
        yield Footer()

    def on_mount(self) -> None:
        if self.config_error:
            self.notify(self.config_error, title="Models config not used", severity="error", timeout=15)
        self.host.remotes.start()  # health checks of the remote models, for the Server and Stats tabs
        self.sub_title = "loading model…" if self._load_on_start else "no model loaded"
        if self._load_on_start:
            self.load_model(self.model_spec, self.default_settings)

    def action_show_tab(self, tab: str) -> None:
        # Move focus out of the old pane first: a focused widget in a hidden pane would
        # pull its tab back to the front.
        self.screen.set_focus(None)
        self.query_one("#tabs", TabbedContent).active = tab
        if tab == "chat":
            self.query_one("#prompt").focus()

    def run_chat_action(self, action: str) -> None:
        self.action_show_tab("chat")
        getattr(self.query_one(ChatPane), f"action_{action}")()

    @work(thread=True, exclusive=True, group="load-model")
    def load_model(self, spec: str | None, settings: EngineSettings, name: str | None = None) -> None:
        from edge_infer.errors import EdgeInferError

        self.call_from_thread(setattr, self, "sub_title", f"loading {name or spec or 'default model'}…")
        try:
            self._unload_for_new_settings(spec, settings)
            self.host.load(spec, settings, name=name)
        except (EdgeInferError, RuntimeError, OSError) as exc:
            self.call_from_thread(self.notify, str(exc), title="Cannot load model", severity="error", timeout=10)
            self.call_from_thread(setattr, self, "sub_title", self.host.description)
            return
        self.call_from_thread(self._model_loaded)

    def _unload_for_new_settings(self, spec: str | None, settings: EngineSettings) -> None:
        """Loading a model that is loaded with other settings reloads it (the host would
        hand back the loaded engine as it is)."""
        from pathlib import Path

        from edge_infer.errors import EdgeInferError

        loaded = next((m for m in self.host.loaded() if spec and m.path == Path(spec)), None)
        if loaded is None or loaded.settings == settings:
            return
        if not loaded.idle():
            raise EdgeInferError(f"{loaded.name} is answering requests: load it with new settings once "
                                 f"they are done")
        self.host.unload(loaded.name)

    @on(HostModels.Changed)
    def _models_changed(self, event: HostModels.Changed) -> None:
        """Loaded on demand, unloaded, evicted, pinned, a new default: every view follows."""
        loading = f"loading {', '.join(event.loading)}…" if event.loading else ""
        self.sub_title = (f"{self.host.description} · {loading}" if self.host.current and loading
                          else loading or self.host.description)
        self.query_one(ChatPane).update_title()
        self.query_one(ModelsPane).refresh_models()

    def _model_loaded(self) -> None:
        self.sub_title = self.host.description
        self.query_one(ChatPane).update_title()
        self.query_one(ModelsPane).refresh_models()
        self.notify(f"{self.host.current.name} is ready.")

    def on_unmount(self) -> None:
        server = self.query(ServerPane)
        if server:
            server.first().stop_server()
        self.host.close()


def run_app(model: str | None = None, settings: EngineSettings | None = None) -> int:
    EdgeInferApp(model, settings).run()
    return 0
