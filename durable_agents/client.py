"""AgentClient: start runs, wait for them, read their results from the store."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, FailureError, WorkflowAlreadyStartedError

from checkpoint.fingerprint import AgentDrift
from checkpoint.format import CheckpointStatus, FormatModel, FinishReason, Message, Role, ToolCall, Usage
from checkpoint.stores import open_store
from checkpoint.stores.base import CheckpointStore
from durable_agents.connection import DEFAULT_TASK_QUEUE, connect
from durable_agents.errors import (
    AgentDriftError,
    CheckpointNotFoundError,
    ConfigurationError,
    ModelProviderError,
    ResumeToolMissingError,
    RunFailedError,
    SessionAwaitingApprovalError,
    SessionBusyError,
)
from workflows.contracts import AGENT_RUN_WORKFLOW, AgentRunInput, RunSummary

PROVIDER_FAILURES = {"ModelProviderRequestError", "ModelProviderMalformedReply",
                     "ModelProviderRetryableError"}

TYPED_FAILURES = {"AgentDriftError": AgentDriftError, "ResumeToolMissingError": ResumeToolMissingError,
                  "ConfigurationError": ConfigurationError}


class RunResult(FormatModel):
    session_id: str
    finish_reason: FinishReason
    messages: list[Message]
    """The whole conversation, from the store."""
    steps: int
    usage: Usage
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """The tool calls of this run, in order."""
    approval_id: str | None = None
    drift: AgentDrift | None = None
    """Set when the run resumed with an agent that changed since the checkpoint (on_agent_drift='warn')."""

    @property
    def text(self) -> str:
        """The last assistant text of the run."""
        for message in reversed(self.messages):
            if message.role == Role.ASSISTANT and message.content:
                return message.content
        return ""


def as_messages(input: str | Message | Sequence[str | Message]) -> list[Message]:
    items = [input] if isinstance(input, (str, Message)) else list(input)
    return [Message.user(i) if isinstance(i, str) else i for i in items]


class AgentClient:
    def __init__(self, client: Client, store: CheckpointStore, task_queue: str = DEFAULT_TASK_QUEUE):
        self.temporal = client
        self.store = store
        self.task_queue = task_queue

    @classmethod
    async def connect(
        cls,
        address: str | None = None,
        *,
        store: CheckpointStore | str | None = None,
        namespace: str | None = None,
        task_queue: str = DEFAULT_TASK_QUEUE,
    ) -> AgentClient:
        """Connect to Temporal (``temporalio.envconfig`` conventions) and open the store."""
        client = await connect(address, namespace)
        opened = store if isinstance(store, CheckpointStore) else open_store(store)
        return cls(client, opened, task_queue)

    async def start(
        self,
        agent: str,
        input: str | Message | Sequence[str | Message],
        *,
        session_id: str,
        model: str | None = None,
        interrupt: bool = False,
    ):
        """Start a run and return its workflow handle without waiting.

        A session with a live run raises ``SessionBusyError``; with
        ``interrupt=True`` the live run is aborted first (its in-flight tool
        calls get ``cancelled`` results) and the new input continues the session.
        """
        header = self.store.load_header(session_id)
        if header is not None and header.status == CheckpointStatus.AWAITING_APPROVAL:
            raise SessionAwaitingApprovalError(session_id, header.approval_id)
        messages = as_messages(input)
        first = next((m.content for m in messages if m.content), "") or "(resume)"
        if interrupt:
            await self.cancel(session_id)
        try:
            return await self.temporal.start_workflow(
                AGENT_RUN_WORKFLOW,
                AgentRunInput(session_id=session_id, agent=agent, input=messages, model=model),
                id=session_id,
                task_queue=self.task_queue,
                result_type=RunSummary,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                static_summary=f"{agent}: {first.splitlines()[0][:120]}",
            )
        except WorkflowAlreadyStartedError as e:
            raise SessionBusyError(session_id) from e

    async def send(
        self,
        agent: str,
        input: str | Message | Sequence[str | Message],
        *,
        session_id: str,
        model: str | None = None,
        interrupt: bool = False,
    ) -> RunResult:
        """Run ``agent`` on ``input`` in session ``session_id`` and wait for the outcome.

        ``input`` may be ``[]`` to resume an unfinished run without new input.
        """
        handle = await self.start(agent, input, session_id=session_id, model=model,
                                  interrupt=interrupt)
        return await self.result(session_id, handle)

    async def resume(self, session_id: str, *, agent: str | None = None) -> RunResult:
        """Continue an unfinished session (e.g. a fork or a crashed run) without new input."""
        header = self.store.load_header(session_id)
        if header is None:
            raise CheckpointNotFoundError(f"no session {session_id!r} in {self.store!r}",
                                          session_id=session_id)
        name = agent or header.agent
        if not name:
            raise ConfigurationError(f"session {session_id!r} records no agent; pass agent=")
        return await self.send(name, [], session_id=session_id)

    async def cancel(self, session_id: str) -> RunResult | None:
        """Abort the session's live run, if any; returns its (aborted) result."""
        handle = self.temporal.get_workflow_handle(session_id, result_type=RunSummary)
        try:
            description = await handle.describe()
        except RPCError as e:
            if e.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        if description.status != WorkflowExecutionStatus.RUNNING:
            return None
        await handle.cancel()
        return await self.result(session_id, handle)

    async def result(self, session_id: str, handle=None) -> RunResult:
        handle = handle or self.temporal.get_workflow_handle(session_id, result_type=RunSummary)
        try:
            summary: RunSummary = await handle.result()
        except WorkflowFailureError as e:
            raise _run_error(session_id, e) from e
        return self.run_result(summary)

    def run_result(self, summary: RunSummary) -> RunResult:
        messages = self.store.load_messages(summary.session_id, 0, summary.message_count)
        run_messages = messages[summary.run_start_index:]
        calls = [c for m in run_messages if m.role == Role.ASSISTANT for c in (m.tool_calls or [])]
        return RunResult(
            session_id=summary.session_id, finish_reason=summary.finish_reason, messages=messages,
            steps=summary.steps, usage=summary.usage, tool_calls=calls,
            approval_id=summary.approval_id, drift=summary.drift,
        )


def _run_error(session_id: str, error: WorkflowFailureError) -> Exception:
    cause: BaseException | None = error.cause
    while isinstance(cause, FailureError) and cause.cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.cause
    if isinstance(cause, ApplicationError):
        if cause.type == "SessionAwaitingApprovalError":
            approval = cause.details[0] if cause.details else None
            return SessionAwaitingApprovalError(session_id, approval)  # type: ignore[arg-type]
        if cause.type in TYPED_FAILURES:
            return TYPED_FAILURES[cause.type](cause.message)
        kind = ModelProviderError if cause.type in PROVIDER_FAILURES else RunFailedError
        return kind(f"run of session {session_id!r} failed: {cause.message}",
                    session_id=session_id, cause_type=cause.type)
    return RunFailedError(f"run of session {session_id!r} failed: {error.cause or error}",
                          session_id=session_id)
