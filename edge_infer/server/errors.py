"""OpenAI-style error bodies: {"error": {"message", "type", "param", "code"}}.

Every failure the server reports goes through APIError, so clients (the `openai` package
maps status codes to exception classes) always get the same shape.
"""

from __future__ import annotations

import json

from starlette.responses import JSONResponse

from edge_infer.errors import ContextOverflowError, EdgeInferError, EngineClosedError, QueueFullError

# OpenAI's `type` per status; clients mostly branch on the status, humans read the type.
_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "invalid_request_error",
          405: "invalid_request_error", 408: "invalid_request_error", 413: "invalid_request_error", 429: "rate_limit_error",
          500: "server_error", 503: "server_error"}


class APIError(Exception):
    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 type: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.type = type or _TYPES.get(status, "server_error")
        self.headers = headers or {}

    def body(self) -> dict:
        """OpenAI's error body (the OpenAI face's: server.faces)."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def message_naming_field(self) -> str:
        """The message, naming the field at fault when it does not already: for the faces whose
        error bodies have no `param` (Anthropic, Ollama)."""
        if not self.param or self.param in self.message:
            return self.message
        return f"{self.message} (field '{self.param}')"

    def response(self) -> JSONResponse:
        return SafeJSONResponse(self.body(), status_code=self.status, headers=self.headers)


class SafeJSONResponse(JSONResponse):
    """JSON that survives lone surrogates (a client's "\\ud800" echoed in a message or an
    `echo`ed prompt): written back as the same \\u escape instead of failing to encode."""

    def render(self, content) -> bytes:
        return json.dumps(content, ensure_ascii=False, allow_nan=False,
                          separators=(",", ":")).encode("utf-8", "backslashreplace")


def bad_request(message: str, param: str | None = None, code: str | None = None) -> APIError:
    return APIError(400, message, param=param, code=code)


def from_engine(exc: Exception, param: str | None = None) -> APIError:
    """Map an exception raised by Engine.submit to the status a client expects."""
    if isinstance(exc, ContextOverflowError):
        return APIError(400, str(exc), param=param, code="context_length_exceeded")
    if isinstance(exc, QueueFullError):
        # A bounded queue answers now instead of letting clients wait without limit.
        return APIError(429, str(exc), code="queue_full", headers={"Retry-After": "1"})
    if isinstance(exc, EngineClosedError):
        return APIError(503, str(exc), code="engine_closed", headers={"Retry-After": "5"})
    if isinstance(exc, (ValueError, EdgeInferError)):  # BadRequestError, chat template refusals
        return APIError(400, str(exc), param=param)
    return APIError(500, f"internal error: {exc}")
