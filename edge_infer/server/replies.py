"""A chat reply's text as OpenAI's message fields: content, reasoning_content (a leading
<think> block) and tool_calls (parsed in the model family's syntax), whole and streamed.

Streaming holds back text that may still become a marker and never retracts anything; a
call that turns out malformed is sent as content, never as an error (chat.families).
"""

from __future__ import annotations

from edge_infer.chat import families as tc
from edge_infer.engine import tool_family


def parser_for_job(engine, body):
    """The tool-call parser for this request, or None when it has no tools to call."""
    if not getattr(body, "tools_for_prompt", None):
        return None
    return tool_family(engine, forced=bool(body.forced_tool))


class ReplyShaper:
    """One per chat request; .stream() gives one ChoiceStream per choice."""

    def __init__(self, parser, reasoning: str = "auto", starts_in_reasoning: bool = False,
                 constrained: bool = False):
        self.parser, self.reasoning, self.starts_in_reasoning = parser, reasoning, starts_in_reasoning
        self.constrained = constrained  # a forced call: the call grammar writes the whole reply

    @classmethod
    def for_job(cls, engine, body) -> "ReplyShaper | None":
        """reasoning: "auto" splits a leading <think> block into reasoning_content, "none"
        leaves it in the content (with tools it is split all the same), "drop" removes it."""
        if not getattr(body, "include_reasoning", True):
            reasoning = "drop"
        else:
            reasoning = "none" if getattr(body, "reasoning_format", "auto") == "none" else "auto"
        parser = parser_for_job(engine, body)
        if parser is None and reasoning == "none":
            return None  # plain text, as before
        template = getattr(engine, "template", None)
        opens = bool(template is not None and template.opens_reasoning(getattr(body, "template_vars", None)))
        return cls(parser, reasoning, starts_in_reasoning=opens,
                   constrained=bool(getattr(body, "forced_tool", None)))

    def whole(self, text: str | list[str], call_began_at: int | None = None) -> tuple[dict, bool]:
        """(message fields, whether it called tools). `text` may be the pieces the engine
        streamed, with the index of the one whose token began a grammar-written call: then
        it is read exactly as the stream is."""
        if self.parser is not None:
            reply = self.parser.parse(text, starts_in_reasoning=self.starts_in_reasoning,
                                      constrained=self.constrained, call_began_at=call_began_at)
        else:
            text = text if isinstance(text, str) else "".join(text)
            reasoning, content = tc.ReasoningSplitter(self.starts_in_reasoning).split(text)
            reply = tc.ParsedReply(content, [], reasoning)
        fields: dict = {"content": reply.content if (reply.content or not reply.tool_calls) else None}
        if reply.reasoning is not None and self.reasoning != "drop":
            fields["reasoning_content"] = reply.reasoning
        if reply.tool_calls:
            fields["tool_calls"] = [{"id": c.id or tc.new_call_id(), "type": "function",
                                     "function": {"name": c.name, "arguments": c.arguments_json}}
                                    for c in reply.tool_calls]
        return fields, bool(reply.tool_calls)

    def stream(self) -> "ChoiceStream":
        return ChoiceStream(self)


class ChoiceStream:
    """Text deltas in, OpenAI `delta` dicts out."""

    def __init__(self, shaper: ReplyShaper):
        self.shaper = shaper
        if shaper.parser is not None:
            self._inner = shaper.parser.stream(starts_in_reasoning=shaper.starts_in_reasoning,
                                               constrained=shaper.constrained)
        else:
            self._inner = tc.ReasoningSplitter(shaper.starts_in_reasoning)
        self._plain = shaper.parser is None
        self.called = False

    def feed(self, text: str, call_began: bool = False) -> list[dict]:
        """A token's text; call_began: that token began a grammar-written call (TokenEvent)."""
        if self._plain and self._inner.passthrough:  # most tokens of a plain chat: no parsing
            return [{"content": text}] if text else []
        out = self._deltas(self._inner.feed(text)) if text else []
        if call_began and not self._plain:
            self._inner.call_began()
        return out

    def finish(self) -> list[dict]:
        return self._deltas(self._inner.finish())

    def _deltas(self, events) -> list[dict]:
        out = []
        for ev in events:
            if isinstance(ev, tc.ContentDelta):
                out.append({"content": ev.text})
            elif isinstance(ev, tc.ReasoningDelta):
                if self.shaper.reasoning != "drop":
                    out.append({"reasoning_content": ev.text})
            elif isinstance(ev, tc.ToolCallStart):
                self.called = True
                out.append({"tool_calls": [{"index": ev.index, "id": ev.id, "type": "function",
                                            "function": {"name": ev.name, "arguments": ""}}]})
            elif isinstance(ev, tc.ToolCallArgsDelta):
                out.append({"tool_calls": [{"index": ev.index, "function": {"arguments": ev.fragment}}]})
        return out
