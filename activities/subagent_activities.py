"""The activities of a sub-agent call: start it, record its answer, follow its approvals.

``start_subagent`` reads the call's arguments from the parent's stored turn,
validates them and puts the sub-agent's task in the store's run-input inbox of
the child's session (so no payload carries it); a call that needs no child run
(bad arguments, the depth limit, a child that had finished before a crash, a
result recorded earlier) gets its result here. ``record_subagent_result``
reads the child's answer from its session and records the parent's result,
``{"result": …, "subagentSessionId": …}``. ``relay_subagent_approval`` saves
the parent's checkpoint as waiting on the child's approval (with a snapshot of
the child's pause) and as going on again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from temporalio import activity

from durable_agents.activities.approvals import save_pause
from durable_agents.activities.deps import ActivityDeps
from durable_agents.activities.events import Keyed, streams, write_events_now
from durable_agents.activities.step_events import (
    call_finished,
    call_started,
    subagent_approval_decided,
    subagent_approval_requested,
    subagent_started,
)
from durable_agents.activities.subagent_contracts import (
    RECORD_SUBAGENT_RESULT,
    RELAY_SUBAGENT_APPROVAL,
    START_SUBAGENT,
    RecordSubagentResultInput,
    RecordSubagentResultOutput,
    RelaySubagentApprovalInput,
    RelaySubagentApprovalOutput,
    StartSubagentInput,
    StartSubagentOutput,
)
from durable_agents.activities.transcript import pending_tool_calls
from durable_agents.checkpoint.events import RunPaused, parse_event
from durable_agents.checkpoint.format import (
    CheckpointHeader,
    CheckpointStatus,
    FinishReason,
    Message,
    Role,
    SubagentApproval,
    ToolCall,
)
from durable_agents.checkpoint.stores._subagents import subagent_session_id
from durable_agents.checkpoint.stores.base import CheckpointStore, last_turn_messages
from durable_agents.providers.base import INVALID_JSON_KEY


def subagent_result(store: CheckpointStore, session_id: str, reason: FinishReason | None = None) -> tuple[str, bool]:
    """The parent's result for a finished sub-agent run: ``{"result", "subagentSessionId"}``
    (plus ``finishReason`` when it did not simply stop); ``{"error": "cancelled", …}`` when aborted."""
    header = store.load_header(session_id)
    assert header is not None, f"sub-agent session {session_id!r} is gone"
    reason = reason or header.finish_reason
    if reason == FinishReason.ABORTED:
        return json.dumps({"error": "cancelled", "subagentSessionId": session_id}), True
    answer: Any = header.output if header.output is not None else _last_text(store, header)
    body: dict[str, Any] = {"result": answer, "subagentSessionId": session_id}
    if reason not in (None, FinishReason.STOP):
        body["finishReason"] = str(reason)
    return json.dumps(body, ensure_ascii=False), False


def _last_text(store: CheckpointStore, header: CheckpointHeader) -> str:
    for message in reversed(last_turn_messages(store, header)):
        if message.role == Role.ASSISTANT and message.content:
            return message.content
    return ""


def approval_snapshot(store: CheckpointStore, session_id: str) -> SubagentApproval | None:
    """What a parent's checkpoint records of its sub-agent's pause (None: it does not wait)."""
    header = store.load_header(session_id)
    if header is None or header.status != CheckpointStatus.AWAITING_APPROVAL or not header.approval_id:
        return None
    pending, _ = pending_tool_calls(last_turn_messages(store, header))
    return SubagentApproval(
        session_id=session_id,
        agent=header.agent,
        approval_id=header.approval_id,
        tool_call=pending[0] if pending else None,
        remaining_tool_calls=header.remaining_tool_calls,
        fingerprint=header.fingerprint,
        subagent_approval=header.subagent_approval,
    )


def _error(content: dict[str, Any]) -> tuple[str, bool]:
    return json.dumps(content, ensure_ascii=False), True


def _message(call: ToolCall, result: tuple[str, bool]) -> Message:
    return Message.tool_result(call, result[0], is_error=result[1])


class SubagentActivities:
    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    def all(self) -> list[Callable[..., Any]]:
        return [self.start_subagent, self.record_subagent_result, self.relay_subagent_approval]

    @activity.defn(name=START_SUBAGENT)
    async def start_subagent(self, inp: StartSubagentInput) -> StartSubagentOutput:
        return await self.deps.in_store(self._start, inp)

    def _start(self, inp: StartSubagentInput) -> StartSubagentOutput:
        store, position = self.deps.store, inp.position
        recorded = store.tool_result(inp.session_id, position)
        call = inp.call
        if recorded is None and inp.turn_position is not None:
            call = self.deps.stored_call(inp.session_id, inp.turn_position, position)
        streamed = self._streamed(inp.session_id)
        if streamed is not None:  # the call starts (once: keyed by its position)
            write_events_now(self.deps, inp.session_id, [call_started(inp.session_id, streamed, call, position)])
        if recorded is not None:  # e.g. a fork's patch, or a result recorded before a crash
            self._finished(inp, streamed, call, recorded)
            return StartSubagentOutput(recorded_through=self._record(inp, recorded))
        agent = self.deps.agent(inp.agent)
        sub = agent.subagent_named(call.name)
        max_depth = inp.max_depth if inp.max_depth is not None else agent.max_subagent_depth
        refused = self._refusal(inp, call, max_depth)
        if refused is not None:
            return self._recorded(inp, streamed, call, _message(call, refused))
        assert sub is not None
        args = sub.input_model.model_validate(call.arguments)
        parent = self.deps.live_header(inp.session_id)
        child_id = subagent_session_id(inp.session_id, position)
        out = StartSubagentOutput(
            child_session_id=child_id,
            child_agent=sub.agent.name,
            max_depth=max_depth,
            parent_session_uid=parent.session_uid,
        )
        child = store.load_header(child_id)
        if child is not None and not _child_of(child, parent, call):
            if child.parent_session_id != inp.session_id:
                content = f"session {child_id!r}, which this call's sub-agent session is named, belongs to another run"
                return self._recorded(inp, streamed, call, _message(call, _error({"error": content})))
            activity.logger.warning("dropping %s: the sub-agent session of an earlier %s", child_id, inp.session_id)
            store.delete(child_id)  # a deleted session's child, under an id the new session reuses
            child = None
        if child is None:
            token = f"subagent-{position}"  # the same on a retry: the inbox entry is replaced, never doubled
            store.put_run_input(child_id, token, [sub.task_message(args)])
            self._child_starts(inp, streamed, call, child_id, sub.agent.name)
            return out.model_copy(update={"input_token": token})
        if child.status == CheckpointStatus.FINISHED:  # it finished before a crash kept its result from us
            content, is_error = subagent_result(store, child_id)
            return self._recorded(inp, streamed, call, Message.tool_result(call, content, is_error=is_error))
        if child.status == CheckpointStatus.AWAITING_APPROVAL:
            if inp.approval_id is not None and inp.approval_id == child.approval_id:
                decided = []
                snapshot = approval_snapshot(store, child_id)
                if streamed is not None and inp.decision is not None and snapshot is not None:
                    decided = [subagent_approval_decided(inp.session_id, snapshot, inp.decision)]
                self._child_starts(inp, streamed, call, child_id, sub.agent.name, decided)
                return out.model_copy(update={"pass_approval": True})
            # its run closed while it waited and nobody decided: its call is gated again, under a new id
            store.append(
                child.model_copy(
                    update={
                        "status": CheckpointStatus.IN_PROGRESS,
                        "approval_id": None,
                        "remaining_tool_calls": None,
                        "subagent_approval": None,
                        "updated_at": None,
                    }
                ),
                child.message_count,
                [],
            )
        self._child_starts(inp, streamed, call, child_id, sub.agent.name)
        return out

    # -- a streamed parent's events of the call ------------------------------------------------
    def _streamed(self, session_id: str) -> int | None:
        """The parent's step when it streams (None: it writes no events)."""
        header = self.deps.store.load_header(session_id)
        return header.step_index if header is not None and streams(header) else None

    def _child_starts(
        self,
        inp: StartSubagentInput,
        step: int | None,
        call: ToolCall,
        child_id: str,
        agent: str,
        before: list[Keyed] | None = None,
    ) -> None:
        """``SubAgentStarted`` (after the child's log as it is now), before the child's run starts."""
        if step is None:
            return
        after = _log_end(self.deps.store, child_id)
        started = subagent_started(inp.session_id, child_id, call.id, agent, inp.position, after=after)
        write_events_now(self.deps, inp.session_id, [*(before or []), started])

    def _finished(self, inp: StartSubagentInput | RecordSubagentResultInput, step: int | None, call: ToolCall,
                  result: Message) -> None:  # fmt: skip
        if step is not None:
            write_events_now(
                self.deps, inp.session_id, [call_finished(inp.session_id, step, call, inp.position, result)]
            )

    def _recorded(
        self, inp: StartSubagentInput, step: int | None, call: ToolCall, result: Message
    ) -> StartSubagentOutput:
        """The call needs no child run: its result, recorded (and streamed)."""
        count = self._record(inp, result)
        self._finished(inp, step, call, self.deps.store.tool_result(inp.session_id, inp.position) or result)
        return StartSubagentOutput(recorded_through=count)

    def _refusal(self, inp: StartSubagentInput, call: ToolCall, max_depth: int) -> tuple[str, bool] | None:
        sub = self.deps.agent(inp.agent).subagent_named(call.name)
        if sub is None:
            return _error({"error": f"agent {inp.agent!r} has no sub-agent named {call.name!r} on this worker"})
        if INVALID_JSON_KEY in call.arguments:
            return _error({"error": f"arguments are not a valid JSON object: {call.arguments[INVALID_JSON_KEY]!r}"})
        try:
            sub.input_model.model_validate(call.arguments)
        except ValidationError as e:
            details = json.loads(e.json(include_url=False, include_input=False))
            return _error({"error": f"invalid arguments for {call.name}", "details": details})
        if inp.depth + 1 > max_depth:
            return _error(
                {
                    "error": f"sub-agent {call.name!r} not run: sub-agents may nest {max_depth} deep here "
                    "(the top-level agent's max_subagent_depth)",
                    "kind": "subagent-depth-limit",
                }
            )
        return None

    def _record(self, inp: StartSubagentInput | RecordSubagentResultInput, message: Message) -> int:
        return self.deps.store.record_tool_result(
            inp.session_id, inp.position, message, inp.batch_start, len(inp.batch)
        )

    @activity.defn(name=RECORD_SUBAGENT_RESULT)
    async def record_subagent_result(self, inp: RecordSubagentResultInput) -> RecordSubagentResultOutput:
        content, is_error = await self.deps.in_store(
            subagent_result, self.deps.store, inp.child_session_id, inp.finish_reason
        )
        message = Message.tool_result(inp.call, content, is_error=is_error)
        count = await self.deps.record_until_stored(
            self.deps.store.record_tool_result, inp.session_id, inp.position, message, inp.batch_start, len(inp.batch)
        )

        def stream() -> None:
            step = self._streamed(inp.session_id)
            recorded = self.deps.store.tool_result(inp.session_id, inp.position) if step is not None else None
            self._finished(inp, step, inp.call, recorded or message)

        await self.deps.in_store(stream)
        return RecordSubagentResultOutput(recorded_through=count)

    @activity.defn(name=RELAY_SUBAGENT_APPROVAL)
    async def relay_subagent_approval(self, inp: RelaySubagentApprovalInput) -> RelaySubagentApprovalOutput:
        return await self.deps.in_store(self._relay, inp)

    def _relay(self, inp: RelaySubagentApprovalInput) -> RelaySubagentApprovalOutput:
        store = self.deps.store
        header = self.deps.live_header(inp.session_id)
        if inp.child_session_id is None:  # the sub-agent goes on: so does this run
            waiting = header.status == CheckpointStatus.AWAITING_APPROVAL and header.approval_id == inp.approval_id
            if waiting and streams(header) and header.subagent_approval is not None:
                self._relay_decided(inp, header.subagent_approval)  # before the snapshot is cleared
            if waiting:
                header = header.model_copy(
                    update={
                        "status": CheckpointStatus.IN_PROGRESS,
                        "approval_id": None,
                        "remaining_tool_calls": None,
                        "subagent_approval": None,
                        "updated_at": None,
                    }
                )
                store.append(header, header.message_count, [])
            return RelaySubagentApprovalOutput(relayed=True, message_count=header.message_count)
        snapshot = approval_snapshot(store, inp.child_session_id)
        if snapshot is None or snapshot.approval_id != inp.approval_id:
            return RelaySubagentApprovalOutput(relayed=False, message_count=header.message_count)
        save_pause(
            self.deps, header, inp.approval_id, inp.remaining_tool_calls, inp.turn_position, subagent_approval=snapshot
        )
        if streams(header):
            events = [subagent_approval_requested(inp.session_id, snapshot)]
            if inp.outcome is not None:  # the run's RunPaused, which the workflow made
                paused = parse_event(inp.outcome)
                assert isinstance(paused, RunPaused)
                paused.outcome.message_count = header.message_count
                events.append((f"outcome:{inp.approval_id}", paused))
            write_events_now(self.deps, inp.session_id, events)
        return RelaySubagentApprovalOutput(relayed=True, message_count=header.message_count)

    def _relay_decided(self, inp: RelaySubagentApprovalInput, snapshot: SubagentApproval) -> None:
        """A streamed parent's ``ApprovalDecided`` for the decision it passed on, and the
        ``SubAgentStarted(resumed=True)`` from the child's pause on (keyed: written once)."""
        events: list[Keyed] = []
        if inp.decision is not None:
            events.append(subagent_approval_decided(inp.session_id, snapshot, inp.decision))
        paused_at = _paused_at(self.deps.store, snapshot.session_id, inp.approval_id)
        if inp.call is not None and inp.position is not None and paused_at is not None:
            started = subagent_started(
                inp.session_id, snapshot.session_id, inp.call.id, snapshot.agent or "", inp.position,
                after=paused_at, resumed=True, approval_id=inp.approval_id,
            )  # fmt: skip
            events.append(started)
        if events:
            write_events_now(self.deps, inp.session_id, events)


SCAN = 200
"""Events read at a time when a child's log is searched from its end."""
SCAN_LIMIT = 5000
"""At most this many of its newest events are searched."""


def _log_end(store: CheckpointStore, session_id: str) -> int:
    try:
        return store.last_event_offset(session_id)
    except NotImplementedError:
        return 0


def _paused_at(store: CheckpointStore, session_id: str, approval_id: str) -> int | None:
    """The offset of the child's ``RunPaused`` on ``approval_id`` (searched from the log's end:
    the child wrote little since, it just got the decision); None: it has none."""
    try:
        end = store.last_event_offset(session_id)
    except NotImplementedError:
        return None
    floor = max(end - SCAN_LIMIT, 0)
    while end > floor:
        start = max(end - SCAN, floor)
        for row in reversed(store.read_events(session_id, start, end - start)):
            event = row.event()
            if isinstance(event, RunPaused) and event.outcome.approval_id == approval_id:
                return row.offset
        end = start
    return None


def _child_of(child: CheckpointHeader, parent: CheckpointHeader, call: ToolCall) -> bool:
    """``child`` is the session of this parent's call (not of a deleted session of the same id)."""
    same_uid = child.parent_session_uid is None or child.parent_session_uid == parent.session_uid
    return child.parent_session_id == parent.session_id and child.parent_tool_call_id == call.id and same_uid
