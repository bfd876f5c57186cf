"""Recorded approval decisions, written through the store's public API, with the counts a
backtest of :data:`CANDIDATE` must report over them (worked out here by hand, not by the
backtest), for ``policy test``'s tests and ``bench/policy_backtest.py``.

Each session of agent ``support`` (or ``billing``, one session in five) holds calls of
``refund`` with ``amount_cents`` from a fixed cycle, each decided by a person: approved
below 9,000 cents except every 7th call (rejected anyway), and every 11th approval made
with edited arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from durable_agents.checkpoint import Checkpoint, Message, ToolCall
from durable_agents.checkpoint.format import CheckpointStatus, Decision, Role
from durable_agents.checkpoint.stores.base import CheckpointStore

T0 = datetime(2026, 11, 1, tzinfo=UTC)
CANDIDATE: dict[str, Any] = {
    "description": "refunds: small ones go through, huge ones never",
    "deny": [{"name": "huge", "tools": ["refund"], "when": [{"arg": "amount_cents", "op": ">", "value": 50000}]}],
    "allow": [{"name": "small", "tools": ["refund"], "when": [{"arg": "amount_cents", "op": "<=", "value": 5000}]}],
}
"""The candidate policy the expected counts are for."""


@dataclass
class Expected:
    total: int = 0
    agree: int = 0
    would_approve_rejected: int = 0
    would_approve_edited: int = 0
    would_deny_approved: int = 0
    would_ask_person: int = 0
    by_agent: dict[str, int] = field(default_factory=dict)

    def of(self, amount: int, approved: bool, edited: bool) -> None:
        self.total += 1
        if amount > 50000:
            if approved:
                self.would_deny_approved += 1
            else:
                self.agree += 1
        elif amount <= 5000:
            if not approved:
                self.would_approve_rejected += 1
            elif edited:
                self.would_approve_edited += 1
            else:
                self.agree += 1
        else:
            self.would_ask_person += 1


def amount_of(n: int) -> int:
    return (n * 7919) % 60000


def write_recorded_decisions(store: CheckpointStore, total: int, *, per_session: int = 10) -> Expected:
    """``total`` decisions in sessions of ``per_session``, one minute apart from ``T0``."""
    expected = Expected()
    n = 0
    for s in range((total + per_session - 1) // per_session):
        agent = "billing" if s % 5 == 4 else "support"
        messages, decisions = [Message.user("refunds, please")], []
        for i in range(min(per_session, total - n)):
            amount = amount_of(n)
            approved = amount < 9000 and n % 7 != 0
            edited = approved and n % 11 == 0
            call = ToolCall(id=f"call_{i}", name="refund", arguments={"amount_cents": amount})
            messages.append(Message(role=Role.ASSISTANT, tool_calls=[call]))
            decisions.append(
                Decision(
                    approval_id=f"ap-{s}-{i}",
                    tool_call_id=call.id,
                    tool_name=call.name,
                    approved=approved,
                    decided_at=T0 + timedelta(minutes=n),
                    decided_by="alice",
                    arguments={"amount_cents": amount // 2} if edited else None,
                    position=len(messages),
                )
            )
            messages.append(Message.tool_result(call, '{"ok": true}' if approved else '{"error": "rejected"}'))
            expected.of(amount, approved, edited)
            expected.by_agent[agent] = expected.by_agent.get(agent, 0) + 1
            n += 1
        store.save(
            Checkpoint(
                session_id=f"refunds-{s:05d}",
                agent=agent,
                messages=messages,
                decisions=decisions,
                status=CheckpointStatus.FINISHED,
            )
        )
    return expected
