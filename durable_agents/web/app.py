"""``create_app``: the HTTP API and the web inbox as one ASGI application (Starlette).

Authentication (``auth.py``): ``Authorization: Bearer <token>``, or the ``da_token`` cookie
that ``POST /api/login`` sets (HttpOnly, SameSite=Strict), or a trusted proxy's identity
header when turned on, or anonymous access from loopback when asked for.

Cross-site request forgery: a state-changing request authenticated by the browser (the
cookie, the proxy's header or anonymous access: what a browser sends on its own) must carry
``X-CSRF-Token`` equal to the ``da_csrf`` cookie (double submit; a cross-site page can read
neither, and cannot set the header without a CORS preflight this app never grants), and an
``Origin`` (or ``Sec-Fetch-Site``) that is this site's when the browser sends one. A request
with ``Authorization`` is not forgeable by a browser and needs neither.

Every response carries a strict Content-Security-Policy (scripts and styles from this
origin only, no inline script, no framing), ``nosniff`` and ``no-referrer``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Match, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from durable_agents.client import AgentClient
from durable_agents.errors import DurableAgentsError
from durable_agents.web.api import DECIDE_WAIT_SECONDS, Api, HttpError, _body, error_of
from durable_agents.web.auth import AuthSettings, Identity, LoginThrottle, Role, TokenFile, is_loopback, roles_of
from durable_agents.web.openapi import openapi_spec
from durable_agents.web.policies import policy_routes
from durable_agents.web.views import LoginBody
from durable_agents.web.webhooks import WebhookNotifier

TOKEN_COOKIE = "da_token"
CSRF_COOKIE = "da_csrf"
CSRF_HEADER = "x-csrf-token"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
FORWARDED_HEADERS = ("x-forwarded-for", "forwarded", "x-real-ip")

Handler = Callable[[Request, Identity], Awaitable[Response]]


class SecurityHeaders:
    """Adds ``SECURITY_HEADERS`` to every HTTP response, and ``Cache-Control: no-store`` to the API's."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        api = scope["path"].startswith("/api/")

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                headers += [(k, v) for k, v in SECURITY_HEADERS if k not in present]
                if api and b"cache-control" not in present:
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


class Web:
    """The app's state: the API, how callers are authenticated, the cookies' settings."""

    def __init__(self, api: Api, auth: AuthSettings, secure_cookies: bool | None) -> None:
        self.api, self.auth, self.secure_cookies = api, auth, secure_cookies

    # -- authentication ---------------------------------------------------------------------
    async def identity(self, request: Request) -> Identity:
        client = request.client.host if request.client else ""
        token = _bearer(request)
        if token is None:
            token = request.cookies.get(TOKEN_COOKIE) or None
        if token is not None:
            return await self.check_token(client, token)
        proxy = self.auth.proxy_header
        if proxy and client in self.auth.proxy_sources:
            name = (request.headers.get(proxy) or "").strip()
            if name:
                return self.auth.proxy_identity(name)
        relayed = any(h in request.headers for h in FORWARDED_HEADERS)  # a local proxy relays others
        if self.auth.anonymous is not None and is_loopback(client) and not relayed:
            return Identity("anonymous (local)", self.auth.anonymous, via="anonymous")
        raise HttpError(401, "UNAUTHENTICATED", "sign in: an API token (Authorization: Bearer …) is needed")

    async def check_token(self, client: str, token: str) -> Identity:
        blocked = self.auth.throttle.blocked_for(client)
        if blocked is not None:
            raise _too_many(blocked)
        entry = self.auth.tokens.find(token) if self.auth.tokens is not None and len(token) <= 500 else None
        if entry is None or not entry.roles:
            await asyncio.sleep(self.auth.throttle.failed(client))  # failed logins are slowed down
            raise HttpError(401, "UNAUTHENTICATED", "this token is not valid (revoked, mistyped, or another server's)")
        return entry.identity()

    def check_csrf(self, request: Request) -> None:
        """Refuse a state-changing request a browser could have sent from another site."""
        if _bearer(request) is not None:
            return
        site = request.headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            raise HttpError(403, "CSRF", f"cross-site request refused (Sec-Fetch-Site: {site})")
        origin = request.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != request.headers.get("host", ""):
            # host and port only: behind a TLS-terminating proxy this app sees http, the browser https
            raise HttpError(403, "CSRF", "cross-site request refused (its Origin is not this site)")
        sent, kept = request.headers.get(CSRF_HEADER, ""), request.cookies.get(CSRF_COOKIE, "")
        if not sent or not kept or not hmac.compare_digest(sent.encode(), kept.encode()):
            raise HttpError(403, "CSRF", f"the {CSRF_HEADER} header must repeat the {CSRF_COOKIE} cookie")

    def cookie_secure(self, request: Request) -> bool:
        return self.secure_cookies if self.secure_cookies is not None else request.url.scheme == "https"

    # -- endpoints ----------------------------------------------------------------------------
    def endpoint(self, handler: Handler, need: Role = Role.VIEWER) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            try:
                identity = await self.identity(request)
                if request.method in UNSAFE_METHODS:
                    self.check_csrf(request)
                if need not in identity.roles and not (need == Role.VIEWER and identity.may_view()):
                    raise HttpError(403, "FORBIDDEN", f"{identity.name} is not allowed to do this (needs {need})")
                return await handler(request, identity)
            except HttpError as e:
                return e.response()
            except DurableAgentsError as e:
                return error_of(e).response()

        return run

    async def me(self, request: Request, identity: Identity) -> Response:
        return JSONResponse(identity.to_dict())

    async def login(self, request: Request) -> Response:
        """Trade a token for the HttpOnly session cookie the inbox runs on."""
        try:
            self.check_csrf(request)
            body: LoginBody = await _body(request, LoginBody)
            identity = await self.check_token(request.client.host if request.client else "", body.token)
        except HttpError as e:
            return e.response()
        response = JSONResponse(identity.to_dict())
        response.set_cookie(
            TOKEN_COOKIE, body.token, httponly=True, samesite="strict", secure=self.cookie_secure(request), path="/"
        )
        return response

    async def logout(self, request: Request) -> Response:
        try:
            self.check_csrf(request)
        except HttpError as e:
            return e.response()
        response = Response(status_code=204)
        response.delete_cookie(TOKEN_COOKIE, path="/", httponly=True, samesite="strict")
        return response

    async def index(self, request: Request) -> Response:
        response = FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})
        if not request.cookies.get(CSRF_COOKIE):
            response.set_cookie(
                CSRF_COOKIE,
                secrets.token_urlsafe(32),
                httponly=False,  # the page's script repeats it in X-CSRF-Token
                samesite="strict",
                secure=self.cookie_secure(request),
                path="/",
            )
        return response


STATIC = Path(str(files("durable_agents.web") / "static"))


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _too_many(seconds: float) -> HttpError:
    error = HttpError(429, "TOO_MANY_FAILURES", f"too many failed sign-ins from here: try again in {seconds:.0f} s")
    return error


SESSIONS = "/api/sessions/"
SESSION_PARTS = ("approval", "decision", "transcript", "events", "fork")
"""What ``/api/sessions/{session_id}/…`` routes to, past the session id."""


def session_target(scope: Scope) -> tuple[str, str | None] | None:
    """The session id and the part of it (``SESSION_PARTS``, or None: the session itself) that a
    ``/api/sessions/…`` request names; None for any other path.

    A session id may hold slashes, and may even end in ``/approval``: the id is read from the
    raw path, where a client encodes its slashes as ``%2F`` (``encodeURIComponent``,
    ``quote(id, safe="")``). The part is the last literal ``/`` segment; an id sent with its
    slashes as they are still works unless it ends in a part's name."""
    path, root = scope["path"], scope.get("root_path", "")
    route_path = path[len(root) :] if root and path.startswith(root + "/") else path  # past a mount's prefix
    if not route_path.startswith(SESSIONS):
        return None
    rest = _raw_route_path(scope, route_path)
    if rest is None:  # no raw path to read (or not this one): the decoded path, as it is
        rest = route_path[len(SESSIONS) :].replace("%", "%25")
    head, slash, part = rest.rpartition("/")
    if slash and head and part in SESSION_PARTS:
        return unquote(head), part
    return unquote(rest), None


def _raw_route_path(scope: Scope, route_path: str) -> str | None:
    """What follows ``/api/sessions/`` in the request's raw (still encoded) path, when the server
    gives it (``raw_path``) and it is the same path as ``route_path`` (a mount's or a proxy's
    prefix before it is skipped)."""
    raw = scope.get("raw_path")
    if not isinstance(raw, bytes):
        return None
    try:
        text = raw.split(b"?", 1)[0].decode("ascii")
    except UnicodeDecodeError:
        return None
    start = text.find(SESSIONS)
    while start != -1:
        if unquote(text[start:]) == route_path:
            return text[start + len(SESSIONS) :]
        start = text.find(SESSIONS, start + 1)
    return None


class SessionRoute(Route):
    """A route under ``/api/sessions/{session_id}``, matched by :func:`session_target` (a
    path pattern cannot tell the id ``a/approval`` from the approval of ``a``)."""

    def __init__(self, part: str | None, endpoint: Callable[..., Any], methods: list[str] | None = None) -> None:
        super().__init__(SESSIONS + "{session_id:path}" + (f"/{part}" if part else ""), endpoint, methods=methods)
        self.part = part

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        target = session_target(scope) if scope["type"] == "http" else None
        if target is None or target[1] != self.part:
            return Match.NONE, {}
        path_params = {**scope.get("path_params", {}), "session_id": target[0]}
        child_scope = {"endpoint": self.endpoint, "path_params": path_params}
        if self.methods and scope["method"] not in self.methods:
            return Match.PARTIAL, child_scope
        return Match.FULL, child_scope


async def _not_found(request: Request, exc: Exception) -> Response:
    return HttpError(404, "NOT_FOUND", "no such endpoint").response()


async def _method_not_allowed(request: Request, exc: Exception) -> Response:
    return HttpError(405, "METHOD_NOT_ALLOWED", f"{request.method} is not allowed here").response()


def create_app(
    client: AgentClient,
    *,
    tokens: TokenFile | str | Path | None = None,
    proxy_header: str | None = None,
    proxy_roles: Sequence[str] = ("viewer",),
    proxy_sources: Sequence[str] = ("127.0.0.1", "::1"),
    anonymous: Sequence[str] | None = None,
    temporal_ui_url: str | None = None,
    secure_cookies: bool | None = None,
    throttle: LoginThrottle | None = None,
    decide_wait: float = DECIDE_WAIT_SECONDS,
    webhooks: WebhookNotifier | None = None,
) -> ASGIApp:
    """The HTTP API, its OpenAPI spec (``/openapi.json``) and the web inbox (``/``), over ``client``.

    Mount it in your own ASGI server (``app.mount("/agents", create_app(client, tokens=…))``)
    or serve it with ``durable-agents web``. ``tokens``: the tokens file (``TokenFile``);
    ``proxy_header``: trust this header, from ``proxy_sources`` only, as the authenticated
    user's name (roles: the tokens file's entry of that name, else ``proxy_roles``);
    ``anonymous``: roles for requests without credentials, from loopback clients only.
    ``temporal_ui_url``: where each run's link points. ``secure_cookies``: mark cookies
    ``Secure`` (default: when the request came over HTTPS). ``decide_wait``: how long a
    decision waits for the run's next outcome before answering without it. ``webhooks``: a
    ``WebhookNotifier`` run while the app runs (its lifespan).
    """
    token_file = TokenFile(tokens) if isinstance(tokens, (str, Path)) else tokens
    auth = AuthSettings(
        tokens=token_file,
        proxy_header=proxy_header.lower() if proxy_header else None,
        proxy_roles=roles_of(proxy_roles),
        proxy_sources=frozenset(proxy_sources),
        anonymous=roles_of(anonymous) if anonymous is not None else None,
        throttle=throttle or LoginThrottle(),
    )
    api = Api(client, temporal_ui_url=temporal_ui_url, decide_wait=decide_wait)
    web = Web(api, auth, secure_cookies)
    spec = openapi_spec()

    async def openapi(request: Request) -> Response:
        return JSONResponse(spec)

    e = web.endpoint
    routes: list[Any] = [
        Route("/", web.index),
        Route("/openapi.json", openapi),
        Route("/api/login", web.login, methods=["POST"]),
        Route("/api/logout", web.logout, methods=["POST"]),
        Route("/api/me", e(web.me)),
        Route("/api/approvals", e(api.approvals)),
        Route("/api/decisions", e(api.audit)),
        Route("/api/diff", e(api.diff)),
        Route("/api/sessions", e(api.sessions)),
        SessionRoute("approval", e(api.approval)),
        SessionRoute("decision", e(api.decide, Role.APPROVER), methods=["POST"]),
        SessionRoute("transcript", e(api.transcript)),
        SessionRoute("events", e(api.events)),
        SessionRoute("fork", e(api.fork, Role.OPERATOR), methods=["POST"]),
        SessionRoute(None, e(api.session)),
        *policy_routes(client, e),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if webhooks is None:
            yield
            return
        async with webhooks.running():
            yield

    app = Starlette(routes=routes, exception_handlers={404: _not_found, 405: _method_not_allowed}, lifespan=lifespan)
    app.state.web = web
    return SecurityHeaders(app)
