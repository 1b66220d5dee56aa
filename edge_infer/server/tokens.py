"""llama-server's token utilities: POST /tokenize, /detokenize and /apply-template, on the
model a request names (none: the default). Token ids are checked against the vocabulary
before llama.cpp sees them; long texts are tokenized off the event loop."""

from __future__ import annotations

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from edge_infer.server.embeddings import run_leased
from edge_infer.server.errors import SafeJSONResponse, bad_request
from edge_infer.server.jobs import chat_message
from edge_infer.server.schemas import Body, ChatCompletionRequest, parse


class TokenizeRequest(Body):
    model: str | None = None
    content: str
    add_special: bool = False   # a BOS where the model wants one (llama-server's default: none)
    parse_special: bool = True  # "<|im_end|>" as its one special token, not as text
    with_pieces: bool = False   # each id with its text


class ApplyTemplateRequest(ChatCompletionRequest):
    # llama-server's /apply-template field: False renders the conversation without the
    # assistant's opening (a prompt to continue, or to count the turns so far).
    add_generation_prompt: bool = True


class DetokenizeRequest(Body):
    model: str | None = None
    tokens: list[int] = Field(max_length=1 << 20)


async def tokenize(srv, request: Request) -> Response:
    srv.authorize(request)
    body = parse(TokenizeRequest, await srv.read_body(request))
    lease = await srv.lease(request, body.model)

    def run(engine):
        ids = engine.model.tokenize(body.content, body.add_special, body.parse_special)
        if not body.with_pieces:
            return ids
        return [{"id": t, "piece": engine.model.piece(t, special=True).decode("utf-8", "replace")} for t in ids]

    tokens = await run_leased(lease, run, "content")
    return SafeJSONResponse({"tokens": tokens})


async def detokenize(srv, request: Request) -> Response:
    srv.authorize(request)
    body = parse(DetokenizeRequest, await srv.read_body(request))
    lease = await srv.lease(request, body.model)

    def check(engine):
        n_vocab = engine.model.n_vocab
        bad = next((i for i, t in enumerate(body.tokens) if not 0 <= t < n_vocab), None)
        if bad is not None:
            raise bad_request(f"token id {body.tokens[bad]} is outside the vocabulary (0..{n_vocab - 1})",
                              f"tokens[{bad}]")

    text = await run_leased(lease, lambda engine: engine.model.detokenize(body.tokens, special=True), "tokens", check)
    return SafeJSONResponse({"content": text})


async def apply_template(srv, request: Request) -> Response:
    """The prompt a chat request becomes (its messages and tools through the model's chat
    template), checked as /v1/chat/completions checks it."""
    srv.authorize(request)
    body = parse(ApplyTemplateRequest, await srv.read_body(request))
    lease = await srv.lease(request, body.model)

    def render(engine):
        return engine.template.render([chat_message(m) for m in body.messages],
                                      add_generation_prompt=body.add_generation_prompt,
                                      tools=body.tools_for_prompt, variables=body.template_vars)

    prompt = await run_leased(lease, render, "messages")
    return SafeJSONResponse({"prompt": prompt})


def token_routes(srv, counted) -> list[Route]:
    def route(path: str, handler) -> Route:
        async def call(request: Request) -> Response:
            return await handler(srv, request)
        return Route(path, counted(path, call), methods=["POST"])

    return [route("/tokenize", tokenize), route("/detokenize", detokenize), route("/apply-template", apply_template)]
