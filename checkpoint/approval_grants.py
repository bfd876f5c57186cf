"""Grants: "approve and stop asking". A person approving a call may also approve the calls
like it to come, for a while or a number of times, without being asked again.

A grant's scope is one tool's calls, as wide as its ``kind`` says:

- ``session``: this agent's calls of the tool in one session;
- ``agent``: this agent's calls of the tool in any session;
- ``tool``: any agent's calls of the tool.

Any scope may narrow further: argument conditions (``when``, as a policy rule's) and
``argumentsDigest``, the digest of the arguments the approver was shown (then only calls
with exactly those arguments match). A grant approves the arguments a call was made with,
never arguments a person edited: :func:`grant_from_approval` refuses an approval with
edited arguments or on arguments other than the ones shown.

A grant is live from ``createdAt`` until it expires (``expiresAt``), is used up
(``uses`` reaching ``maxUses``) or is revoked (``revokedAt``). Everything here is pure:
the time is passed in, and :func:`consume_grant` returns the grant with one more use
rather than changing it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import AwareDatetime, Field, model_validator

from durable_agents.checkpoint.approval_policy import (
    ArgumentCondition,
    PolicyCall,
    PolicyModel,
    arguments_digest,
    check_conditions,
)
from durable_agents.checkpoint.errors import ConfigurationError

__all__ = [
    "Grant",
    "GrantKind",
    "GrantScope",
    "best_grant",
    "check_grant_against_tools",
    "consume_grant",
    "grant_from_approval",
    "grant_is_live",
    "grant_matches",
    "revoke_grant",
]

GrantKind = Literal["session", "agent", "tool"]


class GrantScope(PolicyModel):
    """Which calls a grant approves (see the module's docstring for the kinds)."""

    kind: GrantKind
    tool: str = Field(min_length=1)
    agent: str | None = None
    """Required for ``session`` and ``agent`` grants; absent on ``tool`` grants (any agent)."""
    session_id: str | None = None
    """Required for ``session`` grants; absent on the others."""
    when: list[ArgumentCondition] = Field(default_factory=list)
    arguments_digest: str | None = None
    """Only calls whose arguments have this digest (``arguments_digest``): the ones shown."""

    @model_validator(mode="after")
    def _fields_of_its_kind(self) -> GrantScope:
        if self.kind in ("session", "agent") and not self.agent:
            raise ValueError(f"a {self.kind} grant names its agent")
        if self.kind == "tool" and self.agent is not None:
            raise ValueError("a tool grant holds for every agent: an agent's is an 'agent' grant")
        if (self.kind == "session") != (self.session_id is not None):
            raise ValueError("a session grant names its sessionId, and only a session grant does")
        return self

    def covers(self, call: PolicyCall) -> bool:
        return (
            call.tool == self.tool
            and (self.agent is None or call.agent == self.agent)
            and (self.session_id is None or call.session_id == self.session_id)
            and all(condition.holds(call.arguments) for condition in self.when)
            and (self.arguments_digest is None or arguments_digest(call.arguments) == self.arguments_digest)
        )


class Grant(PolicyModel):
    """One "approve and stop asking", with who made it, when, and how long it holds."""

    id: str = Field(min_length=1)
    scope: GrantScope
    created_by: str = Field(min_length=1)
    created_at: AwareDatetime
    expires_at: AwareDatetime | None = None
    max_uses: int | None = Field(default=None, ge=1)
    uses: int = Field(default=0, ge=0)
    revoked_at: AwareDatetime | None = None
    revoked_by: str | None = None
    approval_id: str | None = None
    """The approval it was made with, when made from a decision."""
    note: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Grant:
        if self.expires_at is not None and self.expires_at <= self.created_at:
            raise ValueError(f"grant {self.id!r} expires before it is created")
        if self.max_uses is not None and self.uses > self.max_uses:
            raise ValueError(f"grant {self.id!r} was used {self.uses} times, more than its maxUses {self.max_uses}")
        return self

    @property
    def uses_left(self) -> int | None:
        return None if self.max_uses is None else self.max_uses - self.uses


def grant_is_live(grant: Grant, now: datetime) -> bool:
    """Created by ``now``, and not expired, used up or revoked at ``now``."""
    return (
        grant.created_at <= now
        and (grant.expires_at is None or now < grant.expires_at)
        and (grant.max_uses is None or grant.uses < grant.max_uses)
        and (grant.revoked_at is None or now < grant.revoked_at)
    )


def grant_matches(grant: Grant, call: PolicyCall, now: datetime) -> bool:
    """Whether ``grant`` approves ``call`` at ``now``: live, and the call in its scope."""
    return grant_is_live(grant, now) and grant.scope.covers(call)


def best_grant(grants: Iterable[Grant], call: PolicyCall, now: datetime) -> Grant | None:
    """The grant that approves ``call`` at ``now``, when several could: the one that expires
    first, then the one with fewest uses left (the broader grants are kept for later), then
    the oldest, then by id, so the choice is the same on every worker and replay."""
    matching = [grant for grant in grants if grant_matches(grant, call, now)]
    if not matching:
        return None
    far = datetime.max.replace(tzinfo=now.tzinfo)
    return min(
        matching,
        key=lambda g: (
            g.expires_at or far,
            g.uses_left if g.uses_left is not None else float("inf"),
            g.created_at,
            g.id,
        ),
    )


def consume_grant(grant: Grant, now: datetime) -> Grant:
    """``grant`` with one more use (it approved a call at ``now``). A grant that is not
    live at ``now`` cannot be used: :class:`ValueError`."""
    if not grant_is_live(grant, now):
        raise ValueError(f"grant {grant.id!r} is not live at {now.isoformat()}: it approves nothing")
    return grant.model_copy(update={"uses": grant.uses + 1})


def revoke_grant(grant: Grant, by: str, now: datetime) -> Grant:
    """``grant`` revoked by ``by`` at ``now`` (a grant revoked already keeps its first revocation)."""
    if grant.revoked_at is not None:
        return grant
    return grant.model_copy(update={"revoked_at": now, "revoked_by": by})


def grant_from_approval(
    *,
    grant_id: str,
    kind: GrantKind,
    call: PolicyCall,
    approved_by: str,
    now: datetime,
    shown_digest: str,
    edited_arguments: Mapping[str, Any] | None = None,
    exact_arguments: bool = False,
    when: Sequence[ArgumentCondition] = (),
    expires_at: datetime | None = None,
    max_uses: int | None = None,
    approval_id: str | None = None,
    note: str | None = None,
) -> Grant:
    """The grant a person makes while approving ``call`` ("approve and stop asking").

    ``shown_digest``: the ``argumentsDigest`` of the arguments the approver was shown; it must
    be the call's. An approval with ``edited_arguments`` makes no grant: what it approved is
    not what the model sent, and a grant approves calls as the model makes them.
    ``exact_arguments``: the grant approves only calls with these very arguments."""
    digest = arguments_digest(call.arguments)
    if shown_digest != digest:
        raise ConfigurationError(
            f"the call's arguments are not the ones {approved_by} was shown ({shown_digest} ≠ {digest}): "
            "no grant is made; show the call again"
        )
    if edited_arguments is not None:
        raise ConfigurationError(
            "an approval with edited arguments makes no grant: a grant approves the arguments a call was "
            "made with, never edited ones; approve without edits, or grant by conditions on the arguments"
        )
    scope = GrantScope(
        kind=kind,
        tool=call.tool,
        agent=call.agent if kind != "tool" else None,
        session_id=call.session_id if kind == "session" else None,
        when=list(when),
        arguments_digest=digest if exact_arguments else None,
    )
    return Grant(
        id=grant_id,
        scope=scope,
        created_by=approved_by,
        created_at=now,
        expires_at=expires_at,
        max_uses=max_uses,
        approval_id=approval_id,
        note=note,
    )


def check_grant_against_tools(grant: Grant, tool_schemas: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuse a grant on a tool the agent lacks or with conditions on arguments its schema
    does not declare (:class:`ConfigurationError`), as policies are refused."""
    tool = grant.scope.tool
    if tool not in tool_schemas:
        raise ConfigurationError(f"grant {grant.id!r}: the agent has no tool {tool!r}")
    problems = check_conditions(tool, grant.scope.when, tool_schemas[tool])
    if problems:
        raise ConfigurationError(f"grant {grant.id!r}: " + "; ".join(problems))
