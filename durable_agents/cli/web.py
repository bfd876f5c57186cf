"""The HTTP API and web inbox: ``web`` (serve them) and ``web-token`` (make, list, revoke API tokens)."""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

from durable_agents.cli._common import UsageError, add_ui_flag, client_of, duration, resolved_target

TOKENS_ENV = "DURABLE_AGENTS_WEB_TOKENS"
DEFAULT_TOKENS = ".durable-agents/web-tokens.json"
DEFAULT_PORT = 8300
WEBHOOK_SECRET_ENV = "DURABLE_AGENTS_WEBHOOK_SECRET"
DEFAULT_WEBHOOK_STATE = ".durable-agents/webhooks.json"
MAKE_SECRET = 'python -c "import secrets; print(secrets.token_urlsafe(32))" > {path} && chmod 600 {path}'
ROLES = ("viewer", "approver", "operator")


def _tokens_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tokens-file",
        default=os.environ.get(TOKENS_ENV, DEFAULT_TOKENS),
        metavar="PATH",
        help=f"the API tokens, hashed (default: ${TOKENS_ENV} or {DEFAULT_TOKENS})",
    )


def register(sub: argparse._SubParsersAction) -> None:
    web = sub.add_parser("web", help="serve the HTTP API (OpenAPI at /openapi.json) and the web inbox for approvals")
    web.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    web.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: a free one)")
    _tokens_flag(web)
    web.add_argument(
        "--proxy-header",
        metavar="NAME",
        help="trust this header (e.g. X-Forwarded-User), set by your authenticating reverse proxy, as the "
        "user's name; only from --proxy-source addresses",
    )
    web.add_argument(
        "--proxy-source",
        action="append",
        metavar="ADDRESS",
        help="the reverse proxy's address (repeatable; default 127.0.0.1 and ::1)",
    )
    web.add_argument(
        "--proxy-role",
        action="append",
        choices=ROLES,
        help="roles of a proxy user without an entry in the tokens file (repeatable; default viewer)",
    )
    web.add_argument(
        "--anonymous",
        action="append",
        choices=ROLES,
        metavar="ROLE",
        help="let requests without credentials in with this role (repeatable); only with a loopback --host",
    )
    web.add_argument("--secure-cookies", action="store_true", help="mark cookies Secure (served behind HTTPS)")
    web.add_argument(
        "--webhook",
        action="append",
        metavar="URL",
        help="POST approval.requested, run.finished and run.failed events here, signed (repeatable)",
    )
    web.add_argument(
        "--webhook-secret-file",
        metavar="PATH",
        help=f"the webhooks' signing secret, 16 characters or more (default: ${WEBHOOK_SECRET_ENV}); make one "
        f"with: {MAKE_SECRET.format(path='PATH')}",
    )
    web.add_argument(
        "--webhook-state",
        default=DEFAULT_WEBHOOK_STATE,
        metavar="PATH",
        help=f"where the webhooks' cursors and undelivered events are kept (default {DEFAULT_WEBHOOK_STATE}); "
        "a restart goes on from it",
    )
    web.add_argument(
        "--webhook-since",
        type=_since,
        default="now",
        metavar="WHEN",
        help="where a webhook's first start (no state for it yet) begins: now (default: what happens from then "
        "on), all (every event the store holds), a duration (24h: sessions saved in the last 24 hours) or an "
        "ISO time; a webhook with state goes on from it",
    )
    add_ui_flag(web)
    web.set_defaults(func=cmd_web)

    token = sub.add_parser("web-token", help="make, list or revoke the web API's tokens")
    _tokens_flag(token)
    actions = token.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="make a token for NAME and print it (once: only its hash is kept)")
    add.add_argument("name", help="who the token identifies (recorded with each decision as decidedBy)")
    add.add_argument("--role", action="append", choices=ROLES, required=True, help="repeatable")
    add.add_argument("--agent", action="append", metavar="AGENT", help="an approver decides only these agents' calls")
    add.add_argument("--tool", action="append", metavar="TOOL", help="an approver decides only these tools' calls")
    actions.add_parser("list", help="the tokens' names, roles and scopes (never the tokens)")
    revoke = actions.add_parser("revoke", help="drop every token of NAME")
    revoke.add_argument("name")
    token.set_defaults(func=cmd_web_token)


async def cmd_web_token(args: argparse.Namespace) -> int:
    from durable_agents.web.auth import TokenFile

    tokens = TokenFile(Path(args.tokens_file))
    if args.action == "add":
        made = tokens.add(args.name, args.role, agents=args.agent, tools=args.tool)
        print(made)
        print(f"token for {args.name} kept (hashed) in {tokens.path}; it is shown only now", file=sys.stderr)
    elif args.action == "list":
        entries = tokens.entries()
        if not entries:
            print(f"no tokens in {tokens.path}")
        for e in entries:
            scope = "".join(
                f" {what}={','.join(sorted(names))}"
                for what, names in (("agents", e.agents), ("tools", e.tools))
                if names is not None
            )
            print(f"{e.name}\t{','.join(sorted(e.roles))}{scope}\t{e.created_at or ''}")
    else:
        dropped = tokens.revoke(args.name)
        if not dropped:
            raise UsageError(f"no token of {args.name!r} in {tokens.path}")
        print(f"revoked {dropped} token(s) of {args.name}")
    return 0


async def cmd_web(args: argparse.Namespace) -> int:
    import uvicorn

    from durable_agents.cli._common import DEFAULT_UI_URL, UI_ENV
    from durable_agents.web import create_app
    from durable_agents.web.auth import TokenFile, is_loopback

    if args.anonymous and not is_loopback(args.host):
        raise UsageError(f"--anonymous is allowed only on a loopback --host (not {args.host!r})")
    hooks = _webhooks(args)  # a missing secret is refused before anything starts (or is made)
    tokens = TokenFile(Path(args.tokens_file))
    has_tokens = bool(tokens.entries())  # a malformed file is refused here, not at the first request
    if not (has_tokens or args.proxy_header or args.anonymous):
        print(
            f"durable-agents web: no tokens in {tokens.path} yet: make one with "
            "`durable-agents web-token add NAME --role approver` (the file is read again when it changes)",
            file=sys.stderr,
        )
    client = await client_of(args)
    notifier = None
    if hooks:
        from durable_agents.web.webhooks import WebhookNotifier

        notifier = WebhookNotifier(client.store, hooks, args.webhook_state, since=args.webhook_since)
        print(f"durable-agents web: {_webhooks_line(args, notifier)}", file=sys.stderr)
    address, _ = resolved_target(args)
    ui = (
        args.ui_url or os.environ.get(UI_ENV) or (DEFAULT_UI_URL if address.startswith(("localhost", "127.")) else None)
    )
    app = create_app(
        client,
        tokens=tokens,
        proxy_header=args.proxy_header,
        proxy_roles=args.proxy_role or ["viewer"],
        proxy_sources=args.proxy_source or ["127.0.0.1", "::1"],
        anonymous=args.anonymous,
        temporal_ui_url=ui,
        secure_cookies=True if args.secure_cookies else None,
        webhooks=notifier,
    )
    config = uvicorn.Config(
        app, host=args.host, port=args.port, log_level="warning", proxy_headers=False, server_header=False
    )
    server = uvicorn.Server(config)
    serving = asyncio.ensure_future(server.serve())
    while not server.started and not serving.done():  # noqa: ASYNC110 - uvicorn says it started by a flag only
        await asyncio.sleep(0.05)
    if server.started:
        port = server.servers[0].sockets[0].getsockname()[1]
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(f"durable-agents web: serving on http://{host}:{port}/ (Ctrl-C stops)", file=sys.stderr, flush=True)
    await serving
    return 0 if server.started else 1


def _since(text: str):  # -> "now" | "all" | datetime: argparse type of --webhook-since
    value = text.strip().lower()
    if value in ("now", "all"):
        return value
    try:
        return datetime.now(UTC) - duration(text)
    except argparse.ArgumentTypeError:
        pass
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid --webhook-since {text!r}: now, all, a duration (e.g. 24h) or an ISO time (e.g. 2026-01-31T09:00Z)"
        ) from None
    return when if when.tzinfo is not None else when.astimezone()  # a time without zone: the local one


def _webhooks(args: argparse.Namespace) -> list:  # -> list[Webhook]
    """The ``--webhook`` URLs with their signing secret (none: no webhooks)."""
    if not args.webhook:
        return []
    from durable_agents.web.webhooks import Webhook

    if args.webhook_secret_file:
        path = Path(args.webhook_secret_file)
        try:
            secret = path.read_text().strip()
        except FileNotFoundError:
            make = MAKE_SECRET.format(path=shlex.quote(str(path)))
            if not path.parent.is_dir():
                make = f"mkdir -p {shlex.quote(str(path.parent))} && {make}"
            raise UsageError(
                f"--webhook-secret-file {path}: no such file; make a secret with: {make} "
                "(the receiver checks signatures with the same secret)"
            ) from None
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"--webhook-secret-file {path}: cannot read it ({e})") from None
    else:
        secret = os.environ.get(WEBHOOK_SECRET_ENV, "").strip()
    if len(secret) < 16:
        where = f"--webhook-secret-file {args.webhook_secret_file}" if args.webhook_secret_file else "no secret given"
        raise UsageError(
            f"--webhook needs a signing secret of 16 characters or more ({where}): --webhook-secret-file PATH or "
            f"${WEBHOOK_SECRET_ENV}; make one with: {MAKE_SECRET.format(path='webhook.secret')}"
        )
    for url in args.webhook:
        if not url.startswith(("https://", "http://")):
            raise UsageError(f"--webhook {url!r}: an http(s) URL")
    return [Webhook(url, secret) for url in args.webhook]


def _webhooks_line(args: argparse.Namespace, notifier) -> str:
    """What the webhooks start from: the first start of a webhook, or its state."""
    new, going_on = len(notifier.new), len(notifier.webhooks) - len(notifier.new)
    parts = []
    if new:
        since = args.webhook_since
        start = (
            "events from now on (--webhook-since all or 24h for earlier ones)"
            if since == "now"
            else "every event the store holds"
            if since == "all"
            else f"the events of sessions saved since {since.isoformat(timespec='seconds')}"
        )
        parts.append(f"{new} webhook(s) start: {start}")
    if going_on:
        ignored = "; --webhook-since is for a first start only" if args.webhook_since != "now" else ""
        parts.append(f"{going_on} webhook(s) go on from {args.webhook_state}{ignored} (delete it to start over)")
    return "; ".join(parts)
