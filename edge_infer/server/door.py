"""The door: Host and Origin checks in front of every route, before a body is read.

Loopback is not a trust boundary: any web page the user opens can reach a loopback port.
- DNS rebinding: a page on evil.example re-resolves its name to 127.0.0.1 and then talks to
  us "same-origin", with `Host: evil.example:8080`. We answer only Hosts that name us:
  localhost, a loopback address, the address the connection came to, or --allowed-host.
- Cross-site "simple" requests: a page may POST a text/plain body anywhere without a
  preflight (the browser adds `Origin`). A request carrying an Origin that is neither a
  loopback origin nor one of --cors-origin is refused before its body is read.
Clients that send no Origin (curl, SDKs, editors) pass. The Unix socket is not checked:
browsers cannot reach it (uvicorn gives such a connection no server address).
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Iterable

from edge_infer.server.errors import APIError
from edge_infer.server.faces import ANTHROPIC, OLLAMA, OPENAI, Face

# http(s)://localhost, 127.x.x.x or [::1], any port: a web UI on the user's own machine.
LOOPBACK_ORIGIN = r"https?://(localhost|127(\.\d{1,3}){3}|\[::1\])(:\d{1,5})?"
_LOOPBACK_ORIGIN = re.compile(LOOPBACK_ORIGIN)
ANY = "*"
CLOSE = {"Connection": "close"}  # a refused client's unread body is not waited for

access_log = logging.getLogger("edge_infer.access")


def face_of(path: str) -> Face:
    """The face of the routes under `path`: Ollama's for /api/*, Anthropic's for /v1/messages,
    OpenAI's otherwise. The door alone goes by the path: it answers before any route is chosen
    (after, a route carries its face: server.routing)."""
    if path.startswith("/api/"):
        return OLLAMA
    if path.startswith(("/v1/messages", "/messages")):
        return ANTHROPIC
    return OPENAI


def hostname_of(host: str) -> str:
    """The name in a Host header, without its port: '[::1]:8080' -> '::1', 'a.b:80' -> 'a.b'."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[1:end] if end > 0 else host
    if host.count(":") == 1:
        host = host.partition(":")[0]
    return host.rstrip(".")


def _ip(name: str):
    try:
        ip = ipaddress.ip_address(name.partition("%")[0])
    except ValueError:
        return None
    return getattr(ip, "ipv4_mapped", None) or ip  # a dual-stack socket reports ::ffff:a.b.c.d


def host_allowed(name: str, served: str, allowed: frozenset[str]) -> bool:
    if ANY in allowed or name == "localhost" or name in allowed:
        return True
    ip = _ip(name)
    if ip is not None and ip.is_loopback:
        return True
    return name == served.lower() or (ip is not None and ip == _ip(served))


def origin_allowed(origin: str, listed: frozenset[str]) -> bool:
    return ANY in listed or origin in listed or _LOOPBACK_ORIGIN.fullmatch(origin) is not None


class Door:
    """Pure ASGI middleware: refuses a foreign Host or Origin with 403 before the app (and
    before any byte of the body is received)."""

    def __init__(self, app, allowed_hosts: Iterable[str] = (), cors_origins: Iterable[str] = ()):
        self.app = app
        self.allowed_hosts = frozenset(hostname_of(h) if h != ANY else ANY for h in allowed_hosts)
        self.cors_origins = frozenset(cors_origins)

    async def __call__(self, scope, receive, send):
        server = scope.get("server")
        if scope["type"] in ("http", "websocket") and server and server[1] is not None:
            refusal = self.refusal(scope, str(server[0]))
            if refusal is not None:
                access_log.info("%s %s %d %s", scope.get("method", "GET"), scope["path"], refusal.status,
                                refusal.code)
                return await face_of(scope["path"]).error_response(refusal)(scope, receive, send)
        return await self.app(scope, receive, send)

    def refusal(self, scope, served: str) -> APIError | None:
        headers = {k: v.decode("latin-1") for k, v in scope["headers"] if k in (b"host", b"origin")}
        name = hostname_of(headers.get(b"host", "localhost"))  # no Host (HTTP/1.0): no browser sent it
        if not host_allowed(name, served, self.allowed_hosts):
            name = name[:100] or "NAME"
            return APIError(403, f"the Host {name!r} is not one this server answers to (localhost, a loopback "
                                 f"address, the address it listens on); if you reach it by that name, start it "
                                 f"with --allowed-host {name} (or allowed_hosts in the models config's [server] "
                                 f"table)", code="host_not_allowed", type="permission_error", headers=dict(CLOSE))
        origin = headers.get(b"origin")
        if origin is not None and not origin_allowed(origin, self.cors_origins):
            return APIError(403, f"web pages from the origin {origin[:100]!r} may not call this server: only "
                                 f"loopback origins may; to allow this one, start it with --cors-origin "
                                 f"{origin[:100]}", code="origin_not_allowed", type="permission_error",
                            headers=dict(CLOSE))
        return None
