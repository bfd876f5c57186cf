"""Encryption for operators: ``codec-server`` and ``new-key``."""

from __future__ import annotations

import argparse
import os

from durable_agents.cli._common import keys_of

TOKEN_ENV = "DURABLE_AGENTS_CODEC_TOKEN"
DEFAULT_ORIGINS = ["http://localhost:8233", "http://127.0.0.1:8233"]


def register(sub: argparse._SubParsersAction) -> None:
    codec = sub.add_parser(
        "codec-server",
        help="serve the encryption codec to the Temporal UI and CLI (POST /encode, /decode)",
        description="The Temporal UI (Data Encoder setting, or the server's --ui-codec-endpoint) and "
        "`temporal … --codec-endpoint URL` decrypt payloads through it, with the keys of "
        "--encryption-key-file / $DURABLE_AGENTS_ENCRYPTION_KEYS.",
    )
    codec.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    codec.add_argument("--port", type=int, default=8081, help="port (default 8081)")
    codec.add_argument(
        "--ui-origin",
        action="append",
        metavar="URL",
        help="a Temporal UI origin allowed to call it (CORS), e.g. https://temporal.example.com; repeatable "
        f"(default: {' and '.join(DEFAULT_ORIGINS)})",
    )
    codec.add_argument(
        "--token",
        default=os.environ.get(TOKEN_ENV),
        help=f"require `Authorization: Bearer TOKEN` on every request (default: ${TOKEN_ENV}; none: anyone "
        "who reaches the port can decrypt)",
    )
    codec.set_defaults(func=cmd_codec_server)

    key = sub.add_parser("new-key", help="print a new encryption key line (ID:BASE64) to add to your keys")
    key.add_argument("--id", help="the key's id (default: k<UTC date and time>)")
    key.set_defaults(func=cmd_new_key)


async def cmd_codec_server(args: argparse.Namespace) -> int:
    from durable_agents.cli.server import _stop_on_signals
    from durable_agents.codec_server import codec_server
    from durable_agents.encryption import EncryptionCodec

    codec = EncryptionCodec(keys_of(args, "codec-server"))
    origins = args.ui_origin or DEFAULT_ORIGINS
    stop = _stop_on_signals()
    with codec_server(codec, host=args.host, port=args.port, origins=origins, token=args.token) as server:
        print(
            f"codec server at {server.url} (keys {', '.join(codec.keys.ids)}; newest {codec.keys.newest[0]}); "
            f"UI origins {', '.join(origins)}; " + ("bearer token required" if args.token else "no token"),
            flush=True,
        )
        print("Ctrl-C to stop.", flush=True)
        await stop.wait()
    return 0


async def cmd_new_key(args: argparse.Namespace) -> int:
    from durable_agents.checkpoint.encryption import new_key

    print(new_key(args.id))
    return 0
