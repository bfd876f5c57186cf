"""An approval policy set from clients this project did not write (issue 42): Temporal's own CLI
(``temporal workflow execute-update-with-start`` of the ``ApprovalPolicies`` workflow's
``set_policy`` update, as the wire contract page shows it) and Node's ``@temporalio/client``
(``executeUpdateWithStart``), against a worker serving the agent: kept in the store's policy
book when it fits the agent's tools; refused, nothing kept, when it names an argument the
tool lacks, has a field the format does not know, or expects another version. And a grant
("approve and stop asking") made with a decision sent by the ``temporal`` CLI."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agents import build_worker
from durable_agents.checkpoint import SqliteStore
from durable_agents.checkpoint.policy_book import PolicyBook, PolicyScope, policy_book_for
from durable_agents.contract import PAGE
from tests.outside_clients.agents import AGENT_NAME, AMOUNT_CENTS, RECIPIENT, charges_of, payer
from tests.outside_clients.conftest import Outside, Ran, run_input, temporal
from tests.outside_clients.test_node_client import node_client_dir
from tests.outside_clients.test_temporal_cli import approve_payload, decide, result, start, wait_pending

pytestmark = pytest.mark.integration
__all__ = ["node_client_dir"]  # the fixture that installs @temporalio/client (or skips without node)
NODE_SCRIPT = Path(__file__).resolve().parent / "node" / "set_policy.mjs"

SMALL = {
    "allow": [{"name": "small", "tools": ["charge_card"], "when": [{"arg": "amount_cents", "op": "<=", "value": 5000}]}]
}


async def set_policy(o: Outside, agent: str, request: dict[str, Any] | str, workflow_id: str | None = None) -> Ran:
    return await temporal(
        o.address,
        "workflow",
        "execute-update-with-start",
        "--task-queue",
        o.task_queue,
        "--type",
        "ApprovalPolicies",
        "--workflow-id",
        workflow_id or f"durable-agents.policies.agent.{agent}@{o.task_queue}",
        "--input",
        json.dumps({"agent": agent}),
        "--id-conflict-policy",
        "UseExisting",
        "--update-name",
        "set_policy",
        "--update-input",
        request if isinstance(request, str) else json.dumps(request),
        "-o",
        "json",
        timeout=20,
    )


@dataclass
class PolicyOutside(Outside):
    book: PolicyBook | None = None


@pytest.fixture(scope="module")
async def outside(env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[PolicyOutside]:
    """A worker serving the payer agent, on its own store and task queue."""
    store = SqliteStore(tmp_path_factory.mktemp("policies") / "store.db")
    task_queue = f"tq-policies-{uuid.uuid4().hex[:10]}"
    ours = PolicyOutside(env.client, env.client.service_client.config.target_host, task_queue)
    ours.book = policy_book_for(store)
    try:
        async with build_worker(env.client, agents=[payer], store=store, task_queue=task_queue):
            yield ours
    finally:
        store.close()


def book_of(o: Outside) -> PolicyBook:
    assert isinstance(o, PolicyOutside) and o.book is not None
    return o.book


async def test_the_pages_command_sets_a_policy_the_worker_checked(outside: Outside) -> None:
    block = re.search(r"```sh\n(temporal workflow execute-update-with-start.*?)\n```", PAGE.read_text(), re.S)
    assert block is not None, "the wire contract page shows the update-with-start command"
    argv = shlex.split(block.group(1).replace("\\\n", " "))
    request = json.loads(argv[argv.index("--update-input") + 1])
    # the page's agent is the demo's booker; here the module's worker serves the payer (same tool)
    ran = await set_policy(outside, AGENT_NAME, request)
    assert ran.returncode == 0, f"the update was refused: {ran}"
    stored = ran.json()["updateResult"]
    assert stored["version"] == 1 and stored["changedBy"] == "alice", ran
    assert stored["scope"] == {"kind": "agent", "name": AGENT_NAME}
    kept = book_of(outside).policy(PolicyScope.of_agent(AGENT_NAME))
    assert kept.version == 1 and kept.policy is not None and kept.policy.allow[0].name == "small"

    again = await set_policy(outside, AGENT_NAME, {**request, "changedBy": "bob"})  # expects version 0
    assert again.returncode != 0 and "PolicyVersionConflictError" in again.stdout + again.stderr, again
    assert book_of(outside).policy(PolicyScope.of_agent(AGENT_NAME)).version == 1


@pytest.mark.parametrize(
    ("request_body", "said"),
    [
        (
            {"policy": {"allow": [{"name": "r", "tools": ["charge_card"], "when": [{"arg": "amount", "op": "<", "value": 1}]}]},
             "changedBy": "alice"},
            "no argument 'amount'",
        ),
        ({"policy": {**SMALL, "allowEverything": True}, "changedBy": "alice"}, "allowEverything"),
        ({"policy": SMALL, "changedBy": "alice", "force": True}, "force"),
        ({"policy": SMALL}, "changedBy"),
        ("[1, 2]", "not a valid request"),
    ],
)  # fmt: skip
async def test_a_bad_policy_is_refused_and_nothing_is_kept(outside: Outside, request_body: Any, said: str) -> None:
    before = book_of(outside).policy(PolicyScope.of_agent(AGENT_NAME)).version
    wid = f"durable-agents.policies.t-{uuid.uuid4().hex[:8]}"
    ran = await set_policy(outside, AGENT_NAME, request_body, workflow_id=wid)
    assert ran.returncode != 0 and said in ran.stdout + ran.stderr, ran
    assert book_of(outside).policy(PolicyScope.of_agent(AGENT_NAME)).version == before


async def test_the_node_client_sets_a_policy_and_is_told_a_refusal(node_client_dir: Path, outside: Outside) -> None:
    agent = AGENT_NAME
    before = book_of(outside).policy(PolicyScope.of_agent(agent)).version

    async def node(request: dict[str, Any]) -> dict[str, Any]:
        args = {"clientDir": str(node_client_dir), "address": outside.address, "taskQueue": outside.task_queue,
                "agent": agent, "request": request, "timeoutMs": 15000}  # fmt: skip
        proc = await asyncio.create_subprocess_exec(
            "node", str(NODE_SCRIPT), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(json.dumps(args).encode()), 60)
        lines = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
        assert proc.returncode == 0 and lines, f"node exited {proc.returncode}: {out.decode()!r} {err.decode()!r}"
        return lines[-1]

    stored = await node({"policy": SMALL, "changedBy": "nora", "expectedVersion": before})
    assert stored["event"] == "stored", stored
    assert stored["stored"]["version"] == before + 1 and stored["stored"]["changedBy"] == "nora"
    wrong = {"allow": [{"name": "w", "tools": ["charge_card"], "when": [{"arg": "cents", "op": "<", "value": 1}]}]}
    refused = await node({"policy": wrong, "changedBy": "nora"})
    assert refused["event"] == "refused" and refused["type"] == "ConfigurationError", refused
    assert "no argument 'cents'" in refused["message"]
    stale = await node({"policy": SMALL, "changedBy": "nora", "expectedVersion": before})
    assert stale["event"] == "refused" and stale["type"] == "PolicyVersionConflictError", stale
    assert book_of(outside).policy(PolicyScope.of_agent(agent)).version == before + 1


async def test_approve_and_stop_asking_from_the_temporal_cli(outside: Outside) -> None:
    """A person deciding with ``temporal workflow update execute --name decide`` makes a grant
    (the decision's ``grant``): the agent's next call runs without asking, the one after asks
    again (one use); a grant with a rejection is refused, nothing decided."""
    book, scope = book_of(outside), PolicyScope.of_agent(AGENT_NAME)
    if book.policy(scope).policy is not None:  # (the module's other tests set one: a person decides here)
        book.clear_policy(scope, by="test", now=datetime.now(UTC))
    first, second, third = outside.session("grant"), outside.session("grant"), outside.session("grant")
    await start(outside, first, run_input(first))
    pending = await wait_pending(outside, first)

    refused = await decide(
        outside, first, approve_payload(pending["approvalId"], approved=False, grant={"scope": "agent"})
    )
    assert refused.returncode != 0 and "InvalidDecisionError" in refused.stdout + refused.stderr, refused
    assert book.get_grant(f"grant-{pending['approvalId']}") is None

    grant = {"scope": "agent", "maxUses": 1, "expiresInSeconds": 600}
    ran = await decide(outside, first, approve_payload(pending["approvalId"], grant=grant), "-o", "json")
    assert ran.returncode == 0, f"the decide update failed: {ran}; {await outside.diagnose(first)}"
    assert ran.json()["result"]["summary"]["finishReason"] == "stop"
    made = book.get_grant(f"grant-{pending['approvalId']}")
    assert made is not None and made.created_by == "temporal-cli" and made.uses == 0 and made.max_uses == 1

    await start(outside, second, run_input(second))
    assert (await result(outside, second))["finishReason"] == "stop"  # approved by the grant: nobody asked
    assert charges_of(second) == [{"amount_cents": AMOUNT_CENTS, "recipient": RECIPIENT}]
    used = book.get_grant(made.id)
    assert used is not None and used.uses == 1

    await start(outside, third, run_input(third))
    assert (await wait_pending(outside, third))["toolName"] == "charge_card"  # used up: a person again
    assert charges_of(third) == []
