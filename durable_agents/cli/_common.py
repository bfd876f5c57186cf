"""What every CLI command shares: the store, the client, argument parsing, JSON output."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shlex
import sys
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from functools import cache
from typing import Any
from urllib.parse import quote

from pydantic import TypeAdapter

from durable_agents._defaults import DEFAULT_TASK_QUEUE
from durable_agents.checkpoint.errors import CheckpointNotFoundError, ConfigurationError
from durable_agents.checkpoint.format import Checkpoint, CheckpointHeader, FormatModel
from durable_agents.checkpoint.stores import DEFAULT_STORE_URL, open_store, redact
from durable_agents.checkpoint.stores.base import CheckpointStore

STORE_ENV = "DURABLE_AGENTS_STORE"
STORE_ENCRYPTION_ENV = "DURABLE_AGENTS_STORE_ENCRYPTION"
UI_ENV = "DURABLE_AGENTS_UI_URL"
DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_UI_URL = "http://localhost:8233"
_LOCAL_DEFAULTS = {"localhost:7233", "127.0.0.1:7233", "[::1]:7233"}


class UsageError(ConfigurationError):
    """A malformed argument value: like argparse's own errors, exit 2."""


class Detached(Exception):
    """Ctrl-C while a command waited for Temporal: what is waited for goes on there.

    ``main()`` prints ``line`` (one line on stderr) and exits 130.
    """

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


@contextlib.asynccontextmanager
async def detach_on_interrupt(line: str) -> AsyncIterator[None]:
    """Turn Ctrl-C during the block into :class:`Detached` with ``line``.

    ``asyncio.run`` answers SIGINT by cancelling the command's task; a Temporal
    call it interrupts may raise its own error (e.g. the SDK's
    ``WorkflowUpdateRPCTimeoutOrCancelledError``) instead of ``CancelledError``:
    whatever is raised while the task is being cancelled is the interruption.
    """
    try:
        yield
    except (asyncio.CancelledError, Exception):
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise Detached(line) from None
        raise


def default_store_url() -> str:
    return os.environ.get(STORE_ENV, DEFAULT_STORE_URL)


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


# -- store and client ------------------------------------------------------------------
def store_of(args: argparse.Namespace) -> CheckpointStore:
    """The store named by ``--store`` (opened once per command)."""
    store = getattr(args, "_store", None)
    if store is None:
        store = open_store(args.store)
        if getattr(args, "store_encryption", False):
            from durable_agents.checkpoint.stores.encrypted import EncryptedStore

            store = EncryptedStore(store, keys_of(args, "--store-encryption"))
        args._store = store
    return store


def codec_of(args: argparse.Namespace):
    """The payload codec of ``--encryption-key-file`` or the environment; None without keys."""
    if not hasattr(args, "_codec"):
        from durable_agents.checkpoint.encryption import load_keys

        keys = load_keys(getattr(args, "encryption_key_file", None))  # malformed keys are refused here
        if keys is None:
            args._codec = None  # no keys: the Temporal SDK (which the codec needs) stays unimported
        else:
            from durable_agents.encryption import EncryptionCodec

            args._codec = EncryptionCodec(keys)
    return args._codec


def keys_of(args: argparse.Namespace, needed_by: str):
    """The configured encryption keys; a usage error naming ``needed_by`` when there are none."""
    codec = codec_of(args)
    if codec is None:
        raise UsageError(
            f"{needed_by} needs encryption keys: set DURABLE_AGENTS_ENCRYPTION_KEYS (ID:BASE64, newest last) or "
            "pass --encryption-key-file PATH; `durable-agents new-key` prints a key"
        )
    return codec.keys


async def client_of(args: argparse.Namespace):
    from durable_agents.client.client import AgentClient
    from durable_agents.client.connection import _connect

    client = getattr(args, "_client", None)
    if client is None:
        store = store_of(args)  # a bad store URL is said before any connection is tried
        # no DurableAgentsPlugin: these commands build no worker (nor import Temporal's)
        temporal = await _connect(args.address, args.namespace, codec=codec_of(args), plugins=[])
        client = AgentClient(temporal, store, args.task_queue, summaries=getattr(args, "summaries", None))
        args._client = client
    return client


def unknown_session(args: argparse.Namespace, session_id: str) -> CheckpointNotFoundError:
    return CheckpointNotFoundError(
        f"no session {session_id!r} in store {redact(args.store)} (`durable-agents sessions` lists them)",
        session_id=session_id,
    )


def load_header(args: argparse.Namespace, session_id: str) -> CheckpointHeader:
    header = store_of(args).load_header(session_id)
    if header is None:
        raise unknown_session(args, session_id)
    return header


def load_checkpoint(args: argparse.Namespace, session_id: str) -> Checkpoint:
    checkpoint = store_of(args).load(session_id)
    if checkpoint is None:
        raise unknown_session(args, session_id)
    return checkpoint


async def live_run(client, session_id: str) -> bool:
    """Whether the session's workflow is open (running)."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError, RPCStatusCode

    try:
        description = await client.temporal.get_workflow_handle(session_id).describe()
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return description.status == WorkflowExecutionStatus.RUNNING


# -- argument values ---------------------------------------------------------------------
def parse_json(text: str, flag: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise UsageError(
            f"{flag}: malformed JSON ({getattr(e, 'msg', e)}) in {text!r}; quote strings as JSON too, e.g. '\"text\"'"
        ) from None


def parse_json_object(text: str, flag: str) -> dict[str, Any]:
    value = parse_json(text, flag)
    if not isinstance(value, dict):
        raise UsageError(f"{flag}: expected a JSON object, got {text!r}")
    return value


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def duration(text: str) -> timedelta:
    """argparse type: ``90s``, ``15m``, ``12h``, ``30d``."""
    match = _DURATION.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: write a number and a unit s, m, h or d, e.g. 30d")
    return timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})


def _whole_number(text: str, what: str, minimum: int, rule: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid {what} {text!r}: expected a whole number") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"invalid {what} {text!r}: {rule}")
    return value


def positive_int(text: str) -> int:
    return _whole_number(text, "count", 1, "expected 1 or more")


def step_number(text: str) -> int:
    return _whole_number(text, "step", 0, "steps count from 0")


# -- waiting commands: progress and the Temporal UI link ------------------------------------
def add_wait_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="live progress on stderr (default: on when stderr is a terminal)",
    )
    add_ui_flag(parser)


def add_ui_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ui-url",
        default=os.environ.get(UI_ENV),
        help=f"Temporal UI base URL for run links (default: ${UI_ENV}, or "
        f"{DEFAULT_UI_URL} when Temporal is the default local one)",
    )


def progress_wanted(args: argparse.Namespace) -> bool:
    flag = getattr(args, "progress", None)
    return flag if flag is not None else sys.stderr.isatty()


def resolved_target(args: argparse.Namespace) -> tuple[str, str]:
    """(address, namespace) the client uses, without connecting."""
    address, namespace = args.address, args.namespace
    if not address or not namespace:
        try:
            from temporalio.envconfig import ClientConfig

            config = ClientConfig.load_client_connect_config()
        except Exception:  # noqa: BLE001 - a broken config file surfaces when connecting
            config = {}
        address = address or config.get("target_host") or DEFAULT_ADDRESS
        namespace = namespace or config.get("namespace") or "default"
    return address, namespace


def ui_link(args: argparse.Namespace, session_id: str) -> str | None:
    """``<ui>/namespaces/<ns>/workflows/<session>`` when the UI address is known."""
    address, namespace = resolved_target(args)
    ui = getattr(args, "ui_url", None) or (DEFAULT_UI_URL if address in _LOCAL_DEFAULTS else None)
    if not ui:
        return None
    return f"{ui.rstrip('/')}/namespaces/{quote(namespace, safe='')}/workflows/{quote(session_id, safe='')}"


def command_prefix(args: argparse.Namespace) -> str:
    """``durable-agents`` plus the global flags given, to print commands users can paste."""
    parts = ["durable-agents"]
    if args.address:
        parts += ["--address", args.address]
    if args.namespace:
        parts += ["--namespace", args.namespace]
    if args.store != default_store_url():
        parts += ["--store", args.store]
    if args.task_queue != DEFAULT_TASK_QUEUE:
        parts += ["--task-queue", args.task_queue]
    if getattr(args, "encryption_key_file", None):
        parts += ["--encryption-key-file", args.encryption_key_file]
    if getattr(args, "store_encryption", False) and not env_flag(STORE_ENCRYPTION_ENV):
        parts.append("--store-encryption")
    return shlex.join(parts)


def no_worker_line(args: argparse.Namespace) -> str:
    """What the CLI says on stderr when no worker polls ``--task-queue``."""
    from durable_agents._workers import no_worker_message

    return f"durable-agents: {no_worker_message(args.task_queue, command_prefix(args))}"


# -- output --------------------------------------------------------------------------------
def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def print_models(models: Sequence[FormatModel]) -> None:
    """Documented-format models as one JSON list: what ``print_json`` prints of their
    ``to_dict()``, serialised by pydantic's own encoder (10,000 approvals: ≈ 0.02 s, not ≈ 0.18 s)."""
    if not models:
        print("[]")
        return
    encoded = _list_of(type(models[0])).dump_json(list(models), indent=2, by_alias=True, exclude_none=True)
    print(encoded.decode())


@cache
def _list_of(model: type[FormatModel]) -> TypeAdapter[list[Any]]:
    return TypeAdapter(list[model])  # type: ignore[valid-type]
