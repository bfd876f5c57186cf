"""Versioned deploys: ``migrate``, and the ``--deployment`` / ``--build-id`` flags of
``worker`` and ``dev`` (see ``durable_agents.versioning``)."""

from __future__ import annotations

import argparse
import shlex

from durable_agents.cli._common import client_of, command_prefix, load_header, print_json


def register(sub: argparse._SubParsersAction) -> None:
    migrate = sub.add_parser(
        "migrate",
        help="move an unfinished session to another build of its Worker Deployment (after the drift check)",
        description="The target build's worker checks the session against its agent as a resume would: a pending "
        "call's tool must exist, and drift is refused when that agent says on_agent_drift='error'. Then the "
        "session's next run starts on the target build; a run paused for approval is closed, and its "
        "approval resumes it there. The drift is recorded in the checkpoint (migrations).",
    )
    migrate.add_argument("session", help="the session id")
    migrate.add_argument("--to", required=True, metavar="BUILD", help="the build id to move it to")
    migrate.add_argument(
        "--deployment", metavar="NAME", help="the Worker Deployment (default: the one the session is on)"
    )
    migrate.add_argument("--json", action="store_true", help="print the migration as JSON")
    migrate.set_defaults(func=cmd_migrate)


def add_versioning_flags(p: argparse.ArgumentParser) -> None:
    """``worker`` / ``dev``: run as a build of a Temporal Worker Deployment."""
    p.add_argument(
        "--deployment",
        metavar="NAME",
        help="run as a build of this Temporal Worker Deployment (Worker Versioning): runs are pinned to it",
    )
    p.add_argument(
        "--build-id",
        metavar="ID",
        help="this worker's build id (with --deployment; default: a hash of the agents' fingerprints)",
    )


def versioning_of(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """``build_worker``'s ``deployment`` and ``build_id`` from the flags (None: unversioned)."""
    from durable_agents.cli._common import UsageError

    deployment, build_id = getattr(args, "deployment", None), getattr(args, "build_id", None)
    if build_id is not None and deployment is None:
        raise UsageError("--build-id needs --deployment NAME: the Worker Deployment it is a build of")
    return deployment, build_id


async def cmd_migrate(args: argparse.Namespace) -> int:
    header = load_header(args, args.session)  # an unknown session is a usage error, said in CLI words
    client = await client_of(args)
    moved = await client.migrate(args.session, args.to, deployment=args.deployment)
    if args.json:
        print_json(moved.model_dump(mode="json", by_alias=True))  # the wire contract's casing
        return 0
    drift = moved.drift.describe() if moved.drift else "none"
    print(f"session {args.session} moved from {moved.from_build or '(no build)'} to {moved.to_build}")
    print(f"agent {moved.agent} drift: {drift} (recorded in the checkpoint's migrations)")
    sid = shlex.quote(args.session)
    if header.status == "awaiting-approval":
        print(f"its approval resumes it there: `{command_prefix(args)} approve {sid}`")
    else:
        print(f"its next run starts there: `{command_prefix(args)} resume {sid}`")
    return 0
