"""Run start and end: load the session, apply the input, mark the outcome."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

from temporalio import activity
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from durable_agents.activities.contracts import (
    ABORT_RUN,
    APPEND_INPUT,
    BEGIN_RUN,
    FINISH_RUN,
    RECORD_FAILURE,
    AbortRunInput,
    AbortRunOutput,
    AppendInputInput,
    AppendInputOutput,
    BeginRunInput,
    BeginRunOutput,
    FinishRunInput,
    RecordFailureInput,
    RunState,
    call_ref,
    call_views,
)
from durable_agents.activities.deps import ActivityDeps
from durable_agents.activities.events import streams, write_events, write_events_now
from durable_agents.activities.step_events import run_failed, run_started
from durable_agents.activities.tools import cancel_unrecorded
from durable_agents.activities.transcript import input_key, new_input_after, pending_tool_calls, strip_system
from durable_agents.activities.versioning import apply_agent_versioning
from durable_agents.agent.agent import Agent
from durable_agents.checkpoint.errors import ConfigurationError, FailureType
from durable_agents.checkpoint.fingerprint import compare_fingerprints
from durable_agents.checkpoint.format import (
    BuildRecord,
    CheckpointHeader,
    CheckpointStatus,
    Fingerprint,
    FinishReason,
    Message,
    RunConfig,
    Usage,
)

MAX_RECORDED_BYTES = 1024 * 1024
"""The largest run configuration recorded in Temporal history (whose payloads must stay
well under Temporal's 2 MB limit); a larger one fails the run at its start, saying so."""


def check_recordable(config: RunConfig) -> None:
    size = len(config.model_dump_json().encode())
    if size > MAX_RECORDED_BYTES:
        raise ConfigurationError(
            f"agent {config.agent!r}: its definition (instructions and tool schemas) is {size / 1e6:.1f} MB, "
            f"recorded in Temporal history at run start, whose payloads must stay well under 2 MB (the limit "
            f"here is {MAX_RECORDED_BYTES // 1024} KB): shorten the instructions or schemas, or move long "
            "reference text behind a tool the model can call"
        )


_REGISTERED: dict[tuple[str, tuple[str, ...]], float] = {}
"""(namespace, attribute names) → when they were last found missing (``inf``: registered)."""
RECHECK_SECONDS = 60.0
"""How long a namespace found without the attributes is believed so before it is asked again."""


async def namespace_has(names: list[str]) -> bool:
    """Whether this worker's namespace has registered every search attribute in ``names``
    (a run that upserts an unregistered one fails each workflow task: never risked)."""
    try:
        client = activity.client()
    except RuntimeError:
        return False
    key = (client.namespace, tuple(names))
    seen = _REGISTERED.get(key)
    if seen == float("inf"):
        return True
    if seen is not None and time.monotonic() - seen < RECHECK_SECONDS:
        return False
    try:
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=client.namespace)
        )
        missing = [name for name in names if name not in listed.custom_attributes]
    except RPCError as e:
        missing = [f"(cannot list them: {e})"]
    _REGISTERED[key] = float("inf") if not missing else time.monotonic()
    if missing:
        activity.logger.warning(
            "namespace %s lacks search attributes %s: its runs set none (register them with "
            "`temporal operator search-attribute create`; `durable-agents server` does)",
            client.namespace,
            ", ".join(missing),
        )
    return not missing


def _fail(message: str, kind: FailureType, *details: object) -> ApplicationError:
    return ApplicationError(message, *details, type=kind, non_retryable=True)


class SessionActivities:
    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    @activity.defn(name=BEGIN_RUN)
    async def begin_run(self, inp: BeginRunInput) -> BeginRunOutput:
        agent = self.deps.agent(inp.agent)
        self._check_same_store(inp)
        if agent.mcp_servers:  # listed here, so the run's recorded config and fingerprint have them
            from durable_agents.activities.mcp import with_listed_mcp_tools

            agent = await with_listed_mcp_tools(self.deps.mcp, agent)
        if inp.input_token is not None:
            # None: applied and dropped by an earlier attempt of this activity, which the
            # checkpoint already shows (so it resumes with no new input, as a retry must)
            kept = await self.deps.in_store(self.deps.store.run_input, inp.session_id, inp.input_token)
            inp = inp.model_copy(update={"input": [*inp.input, *(kept or [])]})
        begun = await self.deps.in_store(self._begin, inp, agent)
        await apply_agent_versioning(self.deps.build, agent)  # an auto-upgrade agent's run (versioned workers)
        if inp.stream:
            await write_events(
                self.deps,
                inp.session_id,
                run_started(inp.session_id, begun.config, begun.state.step_index, begun.drift),
            )
        if inp.input_token is not None:
            await self.deps.in_store(self.deps.store.drop_run_input, inp.session_id, inp.input_token)
        if inp.search_attributes:
            begun.search_attributes = await namespace_has(inp.search_attributes)
        return begun

    def _check_same_store(self, inp: BeginRunInput) -> None:
        """Client and worker must share one store: the client wrote the input to its own."""
        store = self.deps.store
        if inp.store_id is not None and inp.store_id != store.store_id:
            raise _fail(
                f"session {inp.session_id!r} was sent through the store at {inp.store_location} (id "
                f"{inp.store_id}), but this worker uses the store at {store.location} (id {store.store_id}): "
                "point client and worker at the same store (--store or DURABLE_AGENTS_STORE; a relative "
                "sqlite:/// path depends on the directory each was started in)",
                FailureType.CONFIGURATION,
            )

    def _begin(self, inp: BeginRunInput, agent: Agent) -> BeginRunOutput:
        config = agent.run_config(inp.model, inp.model_settings, inp.usage_limits)
        config = config.model_copy(update={"stream": inp.stream or None})  # each run says whether it streams
        fp = agent.fingerprint(inp.model)
        check_recordable(config)
        header, messages = self.deps.transcript(inp.session_id)  # what this worker has not cached, in one read
        build = self.deps.build.record(agent)  # the session's runs are on this build now (None: unversioned)
        if header is None:
            return self._start_session(inp, config, fp, build)
        resolving = inp.resolve_approval_id is not None and inp.resolve_approval_id == header.approval_id
        if header.status == CheckpointStatus.AWAITING_APPROVAL and not resolving:
            raise _fail(
                f"session {inp.session_id!r} is waiting for approval {header.approval_id}; "
                "approve or reject it before sending new input",
                FailureType.SESSION_AWAITING_APPROVAL,
                header.approval_id,
            )
        if header.status == CheckpointStatus.FINISHED:
            return self._continue_session(header, messages, inp, config, fp, build)
        # A resume keeps the run's own choices (saved in runConfig); an agent default that
        # changed since is drift, reported by the fingerprint check.
        saved = header.run_config
        saved_model = inp.model or (saved.model_override if saved else None)
        config = agent.run_config(
            saved_model,
            inp.model_settings or (saved.model_settings if saved else None),
            inp.usage_limits or (saved.usage_limits if saved else None),
        ).model_copy(update={"stream": inp.stream or None})
        if saved is not None and saved.context is not None:  # the run's context policy, as it began
            config = config.model_copy(update={"context": saved.context})
        fp = agent.fingerprint(saved_model)
        return self._resume_session(header, messages, inp, agent, config, fp, build)

    def _start_session(
        self, inp: BeginRunInput, config: RunConfig, fp: Fingerprint, build: BuildRecord | None
    ) -> BeginRunOutput:
        messages = [Message.system(config.instructions)] if config.instructions else []
        run_start = len(messages)
        messages += strip_system(inp.input)
        header = CheckpointHeader(
            session_id=inp.session_id,
            session_uid=uuid.uuid4().hex,
            agent=config.agent,
            message_count=len(messages),
            run_config=config,
            fingerprint=fp,
            run_start_index=run_start,
            run_start_step=0,
            run_start_usage=Usage(),
            parent_session_id=inp.parent_session_id,
            parent_tool_call_id=inp.parent_tool_call_id,
            parent_session_uid=inp.parent_session_uid,
            build=build,
        )
        self.deps.store.append(header, 0, messages)
        state = RunState(message_count=len(messages), step_index=0, run_start_index=run_start)
        return BeginRunOutput(config=config, state=state)

    def _continue_session(
        self,
        header: CheckpointHeader,
        messages: list[Message],
        inp: BeginRunInput,
        config: RunConfig,
        fp: Fingerprint,
        build: BuildRecord | None,
    ) -> BeginRunOutput:
        new = new_input_after(messages, inp.input)
        start = header.message_count
        updated = header.model_copy(
            update={
                "message_count": start + len(new),
                "status": CheckpointStatus.IN_PROGRESS,
                "finish_reason": None,
                "approval_id": None,
                "run_config": config,
                "fingerprint": fp,
                "run_start_index": start,
                "run_start_step": header.step_index,
                "run_start_usage": header.usage,
                "agent": config.agent,
                "updated_at": None,
                "last_error": None,
                "build": build,
            }
        )
        self.deps.store.append(updated, start, new)
        state = RunState(
            message_count=start + len(new),
            step_index=header.step_index,
            usage=header.usage,
            run_start_step=header.step_index,
            run_start_index=start,
            run_start_usage=header.usage,
        )
        return BeginRunOutput(config=config, state=state)

    def _resume_session(
        self,
        header: CheckpointHeader,
        messages: list[Message],
        inp: BeginRunInput,
        agent: Agent,
        config: RunConfig,
        fp: Fingerprint,
        build: BuildRecord | None,
    ) -> BeginRunOutput:
        pending, turn_position = pending_tool_calls(messages)
        # a sub-agent's run is not compared: drift concerns the top-level agent (its own
        # fingerprint is kept in its checkpoint all the same)
        compared = fp if inp.parent_session_id is None else (header.fingerprint or fp)
        drift = self._check_resumable(inp.session_id, header, pending, agent, compared)
        run_start = header.run_start_index or 0
        stored = list(header.pending_input or [])
        new = self._new_resume_input(messages, run_start, inp)
        if new and [input_key(m) for m in stored[-len(new) :]] == [input_key(m) for m in new]:
            new = []  # already queued by this begin_run before a crash (a retried activity)
        queued = stored + new
        state = RunState(
            message_count=header.message_count,
            step_index=header.step_index,
            usage=header.usage,
            run_start_step=header.run_start_step or 0,
            run_start_index=run_start,
            run_start_usage=header.run_start_usage or Usage(),
            pending_tool_calls=[call_ref(c) for c in pending],
            pending_arguments=call_views(pending),
            turn_position=turn_position if pending else None,
            recorded_positions=[
                p
                for p in range(header.message_count, header.message_count + len(pending))
                if self.deps.store.tool_result(inp.session_id, p) is not None
            ],
            arguments_in_store=True,
        )
        appended = [] if pending else queued
        updated = header.model_copy(
            update={
                "message_count": header.message_count + len(appended),
                "run_config": config,
                "fingerprint": fp,
                # input behind pending calls stays in the checkpoint until append_input writes it,
                # so a run that closes meanwhile (a pause, then a terminate) loses none of it
                "pending_input": queued or None if pending else None,
                "finish_reason": None,
                "updated_at": None,
                "status": CheckpointStatus.IN_PROGRESS,
                "approval_id": None,
                "remaining_tool_calls": None,
                "subagent_approval": None,
                "last_error": None,
                "build": build,
            }
        )
        self.deps.store.append(updated, header.message_count, appended)
        state.message_count += len(appended)
        return BeginRunOutput(config=config, state=state, queued_input=queued if pending else [], drift=drift)

    @staticmethod
    def _new_resume_input(messages: list[Message], run_start: int, inp: BeginRunInput) -> list[Message]:
        new = strip_system(inp.input)
        started_with = [m for m in messages[run_start:] if m.role == "user"][: len(new)]
        if new and [input_key(m) for m in new] == [input_key(m) for m in started_with]:
            return []  # the request the run started from, sent again after a crash: a retry
        return new

    def _check_resumable(self, session_id: str, header: CheckpointHeader, pending: list, agent: Agent, fp: Fingerprint):
        """Refuse before any write or call: a pending call's tool is gone, or drift is an error."""
        missing = [c for c in pending if not agent.has_tool(c.name)]
        if missing:
            names = ", ".join(f"{c.name} ({c.id})" for c in missing)
            raise _fail(
                f"session {session_id!r} has pending calls to tools that agent "
                f"{agent.name!r} no longer has: {names}; deploy a worker whose agent has "
                "them, or fork the session and patch their results",
                FailureType.RESUME_TOOL_MISSING,
            )
        drift = compare_fingerprints(header.fingerprint, fp)
        if drift is None or agent.on_agent_drift == "ignore":
            return None
        if agent.on_agent_drift == "error":
            raise _fail(
                f"agent {agent.name!r} changed since session {session_id!r} was saved "
                f"({drift.describe()}); the checkpoint is untouched. Resume it with the "
                "previous agent, or set on_agent_drift='warn'",
                FailureType.AGENT_DRIFT,
                drift.to_dict(),
            )
        activity.logger.warning("agent %s drifted for session %s: %s", agent.name, session_id, drift.describe())
        return drift

    @activity.defn(name=APPEND_INPUT)
    async def append_input(self, inp: AppendInputInput) -> AppendInputOutput:
        def write() -> int:
            header = self.deps.live_header(inp.session_id)
            if header.message_count >= inp.position + len(inp.messages):
                return inp.position + len(inp.messages)  # written before a crash (a re-run)
            updated = header.model_copy(
                update={"message_count": inp.position + len(inp.messages), "pending_input": None, "updated_at": None}
            )
            self.deps.store.append(updated, inp.position, inp.messages)
            return updated.message_count

        return AppendInputOutput(message_count=await self.deps.in_store(write))

    @activity.defn(name=FINISH_RUN)
    async def finish_run(self, inp: FinishRunInput) -> None:
        def write() -> None:
            header = self.deps.live_header(inp.session_id)
            self.deps.store.append(header.finished(inp.finish_reason), header.message_count, [])

        await self.deps.in_store(write)

    @activity.defn(name=RECORD_FAILURE)
    async def record_failure(self, inp: RecordFailureInput) -> None:
        """Say in the checkpoint why the run failed (``lastError``); the session stays resumable."""

        def write() -> None:
            header = self.deps.store.load_header(inp.session_id)
            if header is None:
                return  # nothing to annotate: the failure was that the session is gone
            error = inp.error.model_copy(update={"at": inp.error.at or datetime.now(UTC)})
            self.deps.store.append(
                header.model_copy(update={"last_error": error, "updated_at": None}), header.message_count, []
            )
            if streams(header):
                write_events_now(self.deps, inp.session_id, [run_failed(inp.session_id, error)])

        await self.deps.in_store(write)

    @activity.defn(name=ABORT_RUN)
    async def abort_run(self, inp: AbortRunInput) -> AbortRunOutput:
        """Give every unfinished call of the interrupted turn a ``cancelled`` result."""

        def write() -> int:
            store = self.deps.store
            cancel_unrecorded(self.deps, inp.session_id, inp.batch_start, inp.batch)
            header = self.deps.live_header(inp.session_id)
            store.append(
                header.model_copy(
                    update={
                        "finish_reason": FinishReason.ABORTED,
                        "status": CheckpointStatus.IN_PROGRESS,
                        "approval_id": None,
                        "remaining_tool_calls": None,
                        "subagent_approval": None,
                        "updated_at": None,
                    }
                ),
                header.message_count,
                [],
            )
            return header.message_count

        return AbortRunOutput(message_count=await self.deps.in_store(write))
