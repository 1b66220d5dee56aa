"""Chat conversations kept on disk, one JSON file each, under the user data dir."""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from edge_infer import paths

DEFAULT_SAMPLING = {"temperature": 0.7, "top_p": 0.95, "top_k": 40, "min_p": 0.05,
                    "repeat_penalty": 1.0, "max_tokens": 512, "seed": None}


@dataclass
class Message:
    role: str
    content: str
    stats: dict | None = None  # assistant replies: ttft_s, decode_tok_s, tokens, finish, model


@dataclass
class Conversation:
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    title: str = "New chat"
    system: str = ""
    sampling: dict = field(default_factory=lambda: dict(DEFAULT_SAMPLING))
    messages: list[Message] = field(default_factory=list)
    updated_at: float = field(default_factory=time.time)
    model: str | None = None  # the host's model name it chats with; None: the default model, until the first reply

    def chat_messages(self) -> list[dict]:
        """What the model sees: the system prompt, then the turns."""
        out = [{"role": "system", "content": self.system}] if self.system.strip() else []
        return out + [{"role": m.role, "content": m.content} for m in self.messages]

    def forget(self, message: Message) -> None:
        """Drop a message (a reply stopped before its first token) if it is here."""
        self.messages = [m for m in self.messages if m is not message]

    @classmethod
    def from_dict(cls, d: dict) -> "Conversation":
        msgs = [Message(**m) for m in d.get("messages", [])]
        sampling = dict(DEFAULT_SAMPLING) | d.get("sampling", {})
        return cls(id=d["id"], title=d.get("title", "Chat"), system=d.get("system", ""),
                   sampling=sampling, messages=msgs, updated_at=d.get("updated_at", 0.0), model=d.get("model"))


class ConversationStore:
    def __init__(self, root: Path | None = None):
        self.root = root or paths.data_dir() / "conversations"

    def list(self) -> list[Conversation]:
        if not self.root.exists():
            return []
        out = []
        for f in self.root.glob("*.json"):
            try:
                out.append(Conversation.from_dict(json.loads(f.read_text())))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a damaged file must not take the app down; leave it for the user
        return sorted(out, key=lambda c: c.updated_at, reverse=True)

    def save(self, conv: Conversation) -> None:
        conv.updated_at = time.time()
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{conv.id}.tmp"
        tmp.write_text(json.dumps(asdict(conv), indent=1))
        os.replace(tmp, self.root / f"{conv.id}.json")  # atomic: never a half-written chat

    def delete(self, conv: Conversation) -> None:
        (self.root / f"{conv.id}.json").unlink(missing_ok=True)
