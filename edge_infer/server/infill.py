"""llama-server's POST /infill, what editor autocomplete plug-ins (llama.vscode, Continue,
minuet) ask for: the code before and after the cursor (and other files for context) in, the
middle out, in llama-server's /completion shape (streamed as `data: {"content", "stop"}`).

The prompt is built from the model's own fill-in-the-middle tokens (engine prompts); the
generation is a text completion on the one generation path (server.generation).
"""

from __future__ import annotations

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from edge_infer.chat.events import ContentDelta
from edge_infer.chat.reply import ReplyEnd
from edge_infer.server.errors import SafeJSONResponse, from_engine
from edge_infer.server.faces import OPENAI
from edge_infer.server.generation import Renderer, generate
from edge_infer.server.jobs import Job
from edge_infer.server.openai_wire import sse
from edge_infer.server.schemas import Body, CompletionRequest, parse, validate

STOP_TYPES = {"stop": "eos", "length": "limit"}


class ExtraFile(Body):
    filename: str = ""
    text: str


class InfillRequest(Body):
    model: str | None = None
    input_prefix: str = ""
    input_suffix: str = ""
    input_extra: list[ExtraFile] = Field(default_factory=list, max_length=256)
    prompt: str = ""  # text at the cursor, after input_prefix (llama-server's)
    n_predict: int | None = Field(None, ge=-1)
    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    seed: int | None = None
    stop: list[str] | None = None
    stream: bool = False
    keep_alive: str | float | None = None
    speculative: bool | int | None = None   # as on the OpenAI routes: n-gram drafts on/off/length


def completion_fields(body: InfillRequest, tokens: list[int]) -> dict:
    limit = body.max_tokens or (body.n_predict if body.n_predict and body.n_predict > 0 else 128)
    fields = {"model": body.model, "prompt": tokens, "max_tokens": limit, "stream": body.stream,
              "stop": body.stop, "keep_alive": body.keep_alive}
    sampling = {"temperature": body.temperature, "top_k": body.top_k, "top_p": body.top_p, "min_p": body.min_p,
                "seed": body.seed, "speculative": body.speculative}
    return fields | {k: v for k, v in sampling.items() if v is not None}


def final_fields(model: str, end: ReplyEnd, n_prompt: int) -> dict:
    """llama-server's closing fields: why it stopped and what it counted."""
    st = end.stats
    generated = end.usage.completion_tokens if end.usage else 0
    fields = {"stop": True, "model": model, "stop_type": "word" if end.stop_sequence else
              STOP_TYPES.get(end.finish_reason, "none"), "stopping_word": end.stop_sequence or "",
              "tokens_predicted": generated, "tokens_evaluated": n_prompt, "truncated": False,
              "tokens_cached": end.usage.cached_tokens if end.usage else 0}
    if st is not None and st.first_token_at:
        prompt_ms = (st.first_token_at - st.started_at) * 1e3 if st.started_at else 0.0
        predicted_ms = (st.finished_at - st.first_token_at) * 1e3
        fields["timings"] = {"prompt_n": n_prompt - fields["tokens_cached"], "prompt_ms": round(prompt_ms, 3),
                             "predicted_n": generated, "predicted_ms": round(predicted_ms, 3),
                             "predicted_per_second": round(generated / predicted_ms * 1e3, 2) if predicted_ms else 0.0}
    return fields


class InfillRenderer(Renderer):
    """llama-server's stream: `data: {"content", "stop": false}` per token, then the closing
    fields; a failure is an OpenAI `error` event and the stream ends there."""
    face = OPENAI

    def __init__(self, job: Job, model: str):
        self.job, self.model = job, model

    def token(self, i, tok, events):
        text = "".join(ev.text for ev in events if isinstance(ev, ContentDelta))
        if text:
            yield sse({"index": 0, "content": text, "stop": False})

    def end(self, i, end):
        yield sse({"index": 0, "content": "", **final_fields(self.model, end, self.job.prompt_tokens())})


async def infill(srv, request: Request) -> Response:
    srv.authorize(request)
    body = parse(InfillRequest, await srv.read_body(request))
    lease = await srv.lease(request, body.model, body.keep_alive)
    try:
        extra = tuple((f.filename, f.text) for f in body.input_extra)
        validate(CompletionRequest, completion_fields(body, [0]))  # its numbers first, whatever the model
        try:
            tokens = lease.engine.prompts.infill_tokens(body.input_prefix, body.input_suffix, body.prompt, extra)
        except Exception as exc:
            raise from_engine(exc, "input_prefix") from None
        ours = validate(CompletionRequest, completion_fields(body, tokens))
    except BaseException:
        lease.release()
        raise
    model = lease.name

    def whole(job: Job) -> Response:
        c = job.choices[0]
        return SafeJSONResponse({"index": 0, "content": c.reply.content or "",
                                 **final_fields(model, c.end, job.prompt_tokens())})

    return await generate(srv, request, lease, ours, renderer=lambda job: InfillRenderer(job, model), whole=whole)


def infill_routes(srv, counted) -> list[Route]:
    async def call(request: Request) -> Response:
        return await infill(srv, request)

    return [Route("/infill", counted("/infill", call), methods=["POST"])]
