"""Requests -> prompt tokens: chat template, BOS handling, validation.

Runs on the submitting thread (tokenizing only reads the vocabulary), so a bad request
fails there with a clear error and never reaches the engine thread.
"""

from __future__ import annotations

from pathlib import Path

from edge_infer.chat.literal_text import Masked
from edge_infer.chat.reasoning import THINK_CLOSE
from edge_infer.chat.template import ChatTemplate
from edge_infer.chat.tool_prompt import hf_messages
from edge_infer.engine.literal_tokens import control_texts, tokenize_parts
from edge_infer.engine.native.llama import LlamaModel
from edge_infer.engine.sequence import Request
from edge_infer.engine.think_budget import ThinkBudget
from edge_infer.errors import EdgeInferError


class BadRequestError(EdgeInferError, ValueError):
    """A request the engine refuses before queuing it. `about`: which of its sampling settings
    ("temperature", ..., "grammar"), when it is one; None for the prompt."""

    def __init__(self, message: str, about: str | None = None):
        super().__init__(message)
        self.about = about


def read_template_file(path: str) -> str:
    """A chat template file's text, or a clear error (also when it does not parse)."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadRequestError(f"cannot read the chat template file {path}: {exc}") from None
    if not text.strip():
        raise BadRequestError(f"the chat template file {path} is empty")
    return ChatTemplate(text).source


class Prompter:
    def __init__(self, model: LlamaModel, architecture: str = "", template: str | None = None,
                 reasoning_budget: int = -1):
        """template: a chat template's text to use instead of the model's own; reasoning_budget:
        the default of requests that leave theirs unset."""
        self.model, self.reasoning_budget = model, reasoning_budget
        self._close_tokens: tuple[int, ...] | None = None
        self.template = ChatTemplate(
            template or model.meta("tokenizer.chat_template"),
            bos_token=model.token_to_bytes(model.bos, special=True).decode("utf-8", "replace"),
            eos_token=model.token_to_bytes(model.eos, special=True).decode("utf-8", "replace"),
            architecture=architecture,
            name=f"the chat template {'given for' if template else 'of'} {model.path.name}")

    def tokenize_messages(self, messages: list[dict], tools: list[dict] | None = None,
                          variables: dict | None = None) -> list[int]:
        """Only the template's own text may become control tokens: what the client sent is
        text even where it spells one (chat/literal_text.py). Inputs that spell none are
        rendered and tokenized whole, as always. Tool calls' arguments are read once, here
        (the server's arrive read already)."""
        messages = hf_messages(messages)
        masked = Masked(control_texts(self.model), messages, tools, variables)
        if masked.found:
            messages, tools, variables = masked.messages, masked.tools, masked.variables
        text = self.template.render(messages, add_generation_prompt=True, tools=tools, variables=variables)
        # A template that writes the BOS text itself must not get a second BOS.
        starts_with_bos = bool(self.template.bos_token) and text.startswith(self.template.bos_token)
        add_special = self.model.add_bos and not starts_with_bos
        if masked.found:
            return tokenize_parts(self.model, masked.parts(text), add_special)
        return self.model.tokenize(text, add_special=add_special)

    def tokenize(self, text: str) -> list[int]:
        return self.model.tokenize(text, add_special=True)

    def infill_tokens(self, prefix: str, suffix: str, prompt: str = "",
                      extra: tuple[tuple[str, str], ...] = ()) -> list[int]:
        """A fill-in-the-middle prompt in the model's own FIM tokens, as llama-server builds it:
        the other files (repo and file separators, where the model has them), then
        <PRE> prefix + prompt <SUF> suffix <MID>; the model writes the middle."""
        fim, model = self.model.fim, self.model
        missing = [k for k in ("pre", "suf", "mid") if k not in fim]
        if missing:
            raise BadRequestError("this model has no fill-in-the-middle tokens (its vocabulary lacks FIM "
                                  f"{'/'.join(missing)}): use a code model trained for infill, such as qwen-coder")

        def text(s: str) -> list[int]:
            return model.tokenize(s, add_special=False, parse_special=False)  # user text is never a control token

        head: list[int] = [model.bos] if model.add_bos else []
        if extra and "rep" in fim and "sep" in fim:
            head += [fim["rep"]] + text("edge-infer\n")
            for name, body in extra:
                head += [fim["sep"]] + text(f"{name}\n{body}")
            head += [fim["sep"]] + text("\n")
        elif extra:
            head += text("".join(f"{name}\n{body}\n\n" for name, body in extra))
        return head + [fim["pre"]] + text(prefix + prompt) + [fim["suf"]] + text(suffix) + [fim["mid"]]

    def think_budget(self, request: Request) -> ThinkBudget | None:
        """A chat reply's reasoning budget (None: a text completion, nothing to watch)."""
        if request.messages is None:
            return None
        if self._close_tokens is None:  # "</think>" is one special token where the model has it
            self._close_tokens = tuple(self.model.tokenize(f"\n{THINK_CLOSE}\n\n", add_special=False))
        budget = self.reasoning_budget if request.reasoning_budget is None else request.reasoning_budget
        return ThinkBudget(budget, self.opens_reasoning(request), self._close_tokens)

    def opens_reasoning(self, request: Request) -> bool:
        """Does the prompt end inside a <think> block the template opened (the reply starts
        in reasoning)? Decided here once; the stream carries it to every reader."""
        return request.messages is not None and self.template is not None \
            and self.template.opens_reasoning(request.template_vars)

    def tokens_for(self, request: Request) -> list[int]:
        given = [x is not None for x in (request.prompt, request.messages, request.prompt_tokens)]
        if sum(given) != 1:
            raise BadRequestError("give exactly one of prompt, messages or prompt_tokens")
        try:
            if request.messages is not None:
                if not request.messages:
                    raise BadRequestError("messages must not be empty")
                tokens = self.tokenize_messages(request.messages, request.tools, request.template_vars)
            elif request.prompt is not None:
                tokens = self.tokenize(request.prompt)
            else:
                tokens = list(request.prompt_tokens)
        except UnicodeEncodeError:  # JSON's "\ud800" decodes to a lone surrogate: not UTF-8
            raise BadRequestError("the prompt is not valid Unicode (it has a lone surrogate code point)") from None
        if not tokens:
            raise BadRequestError("the prompt is empty")
        bad = [t for t in tokens if not 0 <= t < self.model.n_vocab]
        if bad:
            raise BadRequestError(f"token id {bad[0]} is outside the vocabulary (0..{self.model.n_vocab - 1})")
        return tokens
