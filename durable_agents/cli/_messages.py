"""The line the CLI prints for a typed error.

The library's errors speak to Python callers (``send(..., interrupt=True)``);
in the CLI the same situation is fixed with a flag or a command. The CLI keeps
the errors as they are and words its own line from their fields, so the two
wordings cannot drift into each other. Errors whose situation the CLI can see
coming (a fork into a taken session id, a session that records no agent, a
worker on a memory store) are checked by the commands before they call the
library, in CLI words.
"""

from __future__ import annotations

import argparse
import shlex

from durable_agents.checkpoint.errors import DurableAgentsError
from durable_agents.cli._common import command_prefix
from durable_agents.errors import SessionAwaitingApprovalError, SessionBusyError, SessionFinishedError


def cli_message(error: DurableAgentsError, args: argparse.Namespace) -> str:
    """What ``durable-agents: error: …`` says for ``error`` in the command ``args`` ran."""
    prefix = command_prefix(args)
    command = getattr(args, "command", None)
    if isinstance(error, SessionBusyError):
        sid = shlex.quote(error.session_id)
        hint = f"follow it with `{prefix} watch {sid}`"
        if command == "run":
            hint += ", or run again with --interrupt to abort it and continue with the new input"
        else:
            hint += f", or abort it first with `{prefix} cancel {sid}`"
        return f"session {error.session_id!r} has a live run: {hint}"
    if isinstance(error, SessionAwaitingApprovalError):
        sid = shlex.quote(error.session_id)
        decide = f"decide it first with `{prefix} approve {sid}` or `{prefix} reject {sid} --note 'why'`"
        then = "then run your input again" if command == "run" else "the run goes on from the decision"
        return f"session {error.session_id!r} is waiting for approval {error.approval_id}: {decide}; {then}"
    if isinstance(error, SessionFinishedError):
        sid = shlex.quote(error.session_id)
        agent = shlex.quote(error.agent) if error.agent else "AGENT"
        what = "a run with no input resumes it" if command == "run" else "a resume"
        return (
            f"session {error.session_id!r} is finished (the agent gave its answer): {what} would make one more "
            f"model call with no new input; continue it with new input: `{prefix} run {agent} 'your message' "
            f"--session {sid}`, or `{prefix} resume {sid} --force` for one more model turn anyway"
        )
    return error.message
