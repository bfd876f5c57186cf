"""A remote codec for the Temporal UI and CLI: ``durable-agents codec-server``.

``POST /encode`` and ``POST /decode`` take and return the protobuf JSON of
``temporal.api.common.v1.Payloads`` (``{"payloads": [{"metadata": {"encoding":
"<base64>"}, "data": "<base64>"}]}``), as the Temporal UI and ``temporal
--codec-endpoint`` send them. With the keys, an operator reads decrypted
payloads; without, nobody does:

- CORS allows only the UI origins given (the browser calls the codec itself,
  from the UI's page), with the headers the UI sends (``X-Namespace``,
  ``Authorization``, ``Content-Type``);
- ``token``: every request must carry ``Authorization: Bearer <token>``
  (``temporal … --codec-auth "Bearer <token>"``); preflight requests carry none
  and need none.
- It listens on 127.0.0.1 unless told otherwise.

Starlette (its CORS middleware) on uvicorn, in a thread (``_http``).
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads
from temporalio.converter import PayloadCodec

from durable_agents._http import HttpServerThread
from durable_agents.checkpoint.encryption import EncryptionKeyError

__all__ = ["DEFAULT_CODEC_PORT", "codec_app", "codec_server"]

DEFAULT_CODEC_PORT = 8081
ALLOWED_HEADERS = ["X-Namespace", "Authorization", "Content-Type"]
MAX_BODY_BYTES = 64 * 1024 * 1024


def codec_app(codec: PayloadCodec, *, origins: Sequence[str] = (), token: str | None = None):
    """The Starlette app: ``/encode``, ``/decode``, and ``/healthz`` (no payloads, no token)."""
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.cors import CORSMiddleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    def refused(status: int, message: str, **headers: str) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    async def convert(request: Request, encode: bool) -> Response:
        if token is not None:
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return refused(401, "missing or wrong bearer token", **{"WWW-Authenticate": "Bearer"})
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            return refused(413, f"request body over {MAX_BODY_BYTES} bytes")
        try:
            payloads = json_format.Parse(body or b"{}", Payloads())
        except json_format.ParseError as e:
            return refused(400, f'expected {{"payloads": [{{"metadata": {{…}}, "data": "<base64>"}}]}}: {e}')
        try:
            done = await (codec.encode if encode else codec.decode)(list(payloads.payloads))
        except EncryptionKeyError as e:
            return refused(422, e.message)
        return Response(json_format.MessageToJson(Payloads(payloads=done)), media_type="application/json")

    async def encode(request: Request) -> Response:
        return await convert(request, True)

    async def decode(request: Request) -> Response:
        return await convert(request, False)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/encode", encode, methods=["POST"]),
            Route("/decode", decode, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
        ],
        middleware=[
            Middleware(
                CORSMiddleware,
                allow_origins=list(origins),
                allow_methods=["POST"],
                allow_headers=ALLOWED_HEADERS,
                allow_credentials=True,  # the UI may send its own login (includeCredentials)
                max_age=600,
            )
        ],
    )


def codec_server(
    codec: PayloadCodec,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_CODEC_PORT,
    origins: Sequence[str] = (),
    token: str | None = None,
) -> HttpServerThread:
    """The codec server, not started: ``with codec_server(codec, port=0) as server: server.url``."""
    return HttpServerThread(codec_app(codec, origins=origins, token=token), host, port, "codec server", "--port")


def ui_origins(ui_url: str) -> list[str]:
    """The origins a UI at ``ui_url`` calls from (127.0.0.1 and localhost name the same host)."""
    origin = ui_url.rstrip("/")
    for a, b in (("://127.0.0.1:", "://localhost:"), ("://localhost:", "://127.0.0.1:")):
        if a in origin:
            return [origin, origin.replace(a, b)]
    return [origin]
