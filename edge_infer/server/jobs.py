"""One API call as engine requests: sampling and grammar from the body, `n` choices per
prompt submitted together, their events merged, cancelled together.

Engine.submit is synchronous and fast (tokenize + queue), so it runs on the event loop;
a refusal (context overflow, full queue) is raised before any response byte is sent.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from edge_infer.chat import (HERMES, CallWrapper, GrammarError, SchemaError, ToolGrammarError, json_schema_grammar,
                             tool_call_continuation, tool_call_grammar, checked_gbnf)
from edge_infer.engine import FinishEvent, Request, RequestStream, SamplingParams, ServedEngine, TokenEvent
from edge_infer.server.errors import APIError, bad_request, from_engine
from edge_infer.chat.reply import Reply, ReplyEnd, ReplyEvent, ReplyReader, fold
from edge_infer.server.replies import family_for, reader_for
from edge_infer.server.schemas import ChatCompletionRequest, CompletionRequest


log = logging.getLogger("edge_infer.server")

MAX_PARALLEL_CALLS = 8  # calls in one forced reply (small models repeat a call until max_tokens)
JSON_OBJECT_GBNF = json_schema_grammar({"type": "object"})  # response_format json_object: any object


def grammar_for(body: ChatCompletionRequest | CompletionRequest,
                wrapper: CallWrapper = HERMES) -> tuple[str | None, str | None]:
    """(GBNF, param it came from). JSON modes become grammar-constrained sampling.
    The engine checks every grammar before llama.cpp sees it (build_sampler); the server
    is stricter with grammars users write: an unused rule there is a mistake, refused."""
    chat = isinstance(body, ChatCompletionRequest)
    fmt = body.response_format if chat else None
    forced = body.forced_tool if chat else None  # tool_choice "required" or a named function
    if forced:
        if (fmt is not None and fmt.type != "text") or body.grammar:
            raise bad_request("tool_choice 'required' or a named function constrains the whole reply to tool "
                              "calls; it cannot be combined with response_format or grammar", "tool_choice")
        try:
            return tool_call_grammar(body.tools_for_prompt, forced, wrapper, parallel=body.parallel_tool_calls,
                                     max_calls=MAX_PARALLEL_CALLS), "tool_choice"
        except ToolGrammarError as exc:
            param = "tool_choice" if exc.index is None else f"tools[{exc.index}].function.parameters"
            raise bad_request(str(exc), param) from None
    if fmt is not None and fmt.type != "text":
        # Our converter (chat/gbnf/json_schema.py, after llama.cpp's C++ one): strings
        # without raw control characters, integer bounds as digit rules.
        if fmt.type == "json_object":
            return JSON_OBJECT_GBNF, "response_format"
        param = "response_format.json_schema.schema"
        try:
            return json_schema_grammar(fmt.json_schema.schema_), param
        except SchemaError as exc:
            raise bad_request(f"cannot turn this JSON schema into a grammar: {exc}", param) from None
    if body.grammar:
        try:
            return checked_gbnf(body.grammar), "grammar"
        except GrammarError as exc:
            raise bad_request(f"invalid grammar: {exc}", "grammar") from None
    return None, None


def call_constraint(wrapper: CallWrapper | None, body: ChatCompletionRequest) -> dict:
    """tool_choice "auto": once the reply opens a call in its family's syntax (Hermes, Mistral,
    Llama 3, FunctionGemma, Gemma tool_code), the rest of it follows the tools' grammar
    (engine: call_trigger / call_grammar). The generic JSON fallback has no trigger."""
    if wrapper is None or body.forced_tool or body.grammar:
        return {}
    fmt = body.response_format
    if fmt is not None and fmt.type != "text":
        return {}
    try:
        grammar = checked_gbnf(tool_call_continuation(body.tools_for_prompt, wrapper, parallel=body.parallel_tool_calls,
                                                      max_calls=MAX_PARALLEL_CALLS), allow_unused=True)
    except ToolGrammarError as exc:
        param = "tool_choice" if exc.index is None else f"tools[{exc.index}].function.parameters"
        raise bad_request(str(exc), param) from None
    except GrammarError as exc:
        # Many large schemas (an agent's two dozen tools) make a grammar too big to sample
        # with: under "auto" the calls are then read as the model writes them, unconstrained.
        log.info("tool calls left unconstrained: %s", exc)
        return {}
    return {"call_trigger": wrapper.trigger, "call_grammar": grammar}


def sampling_for(body, grammar: str | None, index: int, **call) -> SamplingParams:
    temperature = 0.0 if body.top_p == 0 else body.temperature  # top_p 0: only the top token
    return SamplingParams(
        temperature=temperature, top_k=body.top_k, top_p=body.top_p or 1.0, min_p=body.min_p,
        repeat_penalty=body.repeat_penalty, presence_penalty=body.presence_penalty,
        frequency_penalty=body.frequency_penalty,
        # Choices of one call must differ, yet a seeded call must repeat exactly.
        seed=None if body.seed is None or body.seed == -1 else body.seed + index,
        max_tokens=body.limit, stop=body.stops, ignore_eos=body.ignore_eos, grammar=grammar,
        logit_bias=body.bias_pairs, **call)


def chat_message(m) -> dict:
    """A request message as the engine takes it: role, content, and tool calls or the id of
    the call a tool message answers (OpenAI's shape; the chat template adapts it)."""
    out = {"role": m.role, "content": m.model_dump()["content"] or ""}
    if m.tool_calls:
        out["tool_calls"] = [c.model_dump() for c in m.tool_calls]
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    return out


SAMPLING_FIELDS = ("logit_bias", "temperature", "top_p", "min_p", "top_k", "repeat_penalty", "repeat_last_n",
                   "presence_penalty", "frequency_penalty", "seed")


def param_of(refusal: Exception, grammar_param: str | None, prompt_param: str) -> str:
    """Which request field an engine refusal is about: the engine names its sampling setting
    (BadRequestError.about), which is the request's field of that name, or the grammar,
    which came from grammar_param; anything else is about the prompt."""
    about = getattr(refusal, "about", None)  # only the engine's BadRequestError says
    if about in SAMPLING_FIELDS:
        return about
    if about == "grammar" and grammar_param:
        return grammar_param
    return prompt_param


@dataclass
class Choice:
    index: int
    prompt: str | list[int] | None = None  # text completions: what `echo` repeats
    parts: list[str] = field(default_factory=list)  # the raw text, as the engine streamed it
    events: list[ReplyEvent] = field(default_factory=list)  # what the reply reader made of it
    logprobs: list = field(default_factory=list)  # [(token, log-softmax vector)]
    finish: FinishEvent | None = None

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def reply(self) -> Reply:
        return fold(self.events)

    @property
    def end(self) -> ReplyEnd:
        """The reply's end (the last of its events, once collected)."""
        return next(ev for ev in reversed(self.events) if isinstance(ev, ReplyEnd))


class Job:
    """plain: replies are text as it comes (no reasoning or tool calls read out of them)."""

    def __init__(self, engine: ServedEngine, body: ChatCompletionRequest | CompletionRequest, source: str = "api",
                 plain: bool = False):
        self.engine = engine
        self._server_draft_max = engine.settings.draft_max
        self.body = body
        self.streams: list[RequestStream] = []
        self.choices: list[Choice] = []
        if isinstance(body, ChatCompletionRequest):
            self.logprobs, self.top_logprobs = body.logprobs, body.top_logprobs or 0
        else:  # legacy: logprobs=N asks for the chosen token and the N most likely
            self.logprobs, self.top_logprobs = body.logprobs is not None, body.logprobs or 0
        self._source = source
        self.on_finish = None  # called with each FinishEvent (metrics)
        self._plain = plain
        self.readers: list[ReplyReader] = []  # one per choice: its tokens as reply events

    def submit(self) -> None:
        body = self.body
        family = family_for(self.engine, body, self._plain)
        wrapper = family.wrapper if family is not None else None
        grammar, grammar_param = grammar_for(body, wrapper or HERMES)
        call = call_constraint(wrapper, body) if isinstance(body, ChatCompletionRequest) else {}
        if isinstance(body, ChatCompletionRequest):
            messages = [chat_message(m) for m in body.messages]
            prompts, prompt_param, tools = [("messages", messages)], "messages", body.tools_for_prompt
            extra = {"template_vars": body.template_vars, "reasoning_budget": body.reasoning_budget_tokens}
        elif body.suffix is not None:  # fill in the middle: the model's FIM tokens around the gap
            try:
                prompts = [("prompt_tokens", self.engine.prompts.infill_tokens(body.prompt, body.suffix))]
            except Exception as exc:
                raise from_engine(exc, "suffix") from None
            prompt_param, tools, extra = "prompt", None, {}
        else:
            prompts = [("prompt_tokens" if isinstance(p, list) else "prompt", p) for p in body.prompts()]
            prompt_param, tools, extra = "prompt", None, {}
        try:
            for kind, prompt in prompts:
                for i in range(body.n):
                    req = Request(**{kind: prompt}, **extra, tools=tools, sampling=sampling_for(body, grammar, i, **call),
                                  source=self._source, capture_logprobs=self.logprobs,
                                  draft_max=body.draft_max(self._server_draft_max))
                    stream = self.engine.submit(req)
                    self.choices.append(Choice(len(self.choices), prompt if kind != "messages" else None))
                    self.readers.append(reader_for(self.engine, body, stream, self._plain))
                    self.streams.append(stream)
        except Exception as exc:  # refused by the engine: nothing of this call may keep running
            self.cancel()
            raise from_engine(exc, param_of(exc, grammar_param, prompt_param)) from None

    def cancel(self) -> None:
        for s in self.streams:
            s.cancel()  # a no-op for requests that already finished

    async def events(self):
        """(choice index, event) from every stream as they come, until all have finished."""
        async for i, ev in self._merged():
            if isinstance(ev, FinishEvent):
                self.choices[i].finish = ev
                if self.on_finish:
                    self.on_finish(ev)
            yield i, ev

    @property
    def done(self) -> bool:
        return all(c.finish is not None for c in self.choices)

    async def _merged(self):
        if len(self.streams) == 1:  # the common case: no extra task per token
            async for ev in self.streams[0]:
                yield 0, ev
            return
        queue: asyncio.Queue = asyncio.Queue()

        async def pump(i: int, stream: RequestStream):
            async for ev in stream:
                queue.put_nowait((i, ev))

        tasks = [asyncio.create_task(pump(i, s)) for i, s in enumerate(self.streams)]
        try:
            left = len(tasks)
            while left:
                i, ev = await queue.get()
                left -= isinstance(ev, FinishEvent)
                yield i, ev
        finally:
            for t in tasks:
                t.cancel()

    def prompt_tokens(self) -> int:
        """The prompt's tokens as submitted (a prompt counts once however many choices)."""
        return sum(s.prompt_tokens for i, s in enumerate(self.streams) if i % self.body.n == 0)

    def usage(self) -> tuple[int, int, int]:
        """(prompt, completion, cached) tokens; a prompt counts once however many choices."""
        stats = [(c.index, c.finish.stats) for c in self.choices if c.finish and c.finish.stats]
        firsts = [s for i, s in stats if i % self.body.n == 0]
        return (sum(s.prompt_tokens for s in firsts), sum(s.generated_tokens for _, s in stats),
                sum(s.cached_tokens for s in firsts))

    async def replies(self):
        """(choice index, the token event or None at the end, its reply events) as they come."""
        async for i, ev in self.events():
            reader = self.readers[i]
            if isinstance(ev, TokenEvent):
                events = reader.token(ev.text, ev.call_began)
                if reader.calls_ended:
                    self.streams[i].cancel()  # a repeated call: the rest would be more of the same
                yield i, ev, events
            else:
                yield i, None, reader.end(ev.reason, ev.text, ev.stats, ev.error, ev.stop_sequence)

    async def collect(self) -> None:
        """Run every choice to its end (non-streaming responses): the same events a stream
        sends, kept to be folded into the whole reply."""
        async for i, tok, events in self.replies():
            c = self.choices[i]
            c.events += events
            if tok is None:
                c.parts.append(c.finish.text)
                if (err := generation_error(events[-1])) is not None:
                    self.cancel()
                    raise err
                continue
            c.parts.append(tok.text)
            if tok.logprobs is not None:
                c.logprobs.append((tok.token, tok.logprobs))


def generation_error(end: ReplyEnd) -> APIError | None:
    """The error to answer with when a generation ended by failing (or the engine shut down)."""
    if end.finish_reason == "timeout":  # the server's deadline, not a fault: retry later
        return APIError(503, str(end.error), code="deadline_exceeded", headers={"Retry-After": "1"})
    if end.finish_reason == "unavailable":  # the model's engine process ended (a worker lost): reloads
        return APIError(503, str(end.error), code="model_unavailable", headers={"Retry-After": "5"})
    if end.finish_reason == "error" or (end.finish_reason == "cancelled" and end.error is not None):
        return APIError(500, f"generation failed: {end.error}", code="generation_error")
    return None
