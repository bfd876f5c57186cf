"""Workflows stay deterministic: recorded histories replay, and workflows/
imports nothing that does I/O, reads clocks or draws random numbers."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from durable_agents.plugin import DurableAgentsPlugin
from durable_agents.workflows import ALL_WORKFLOWS

ROOT = Path(__file__).resolve().parent.parent
HISTORIES = sorted((ROOT / "tests" / "histories").glob("*.json"))


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_recorded_history_replays(path: Path):
    replayer = Replayer(workflows=ALL_WORKFLOWS, plugins=[DurableAgentsPlugin()])
    recorded = json.loads(path.read_text())
    started = recorded["events"][0]["workflowExecutionStartedEventAttributes"]
    # the run's own id: a run checks that it is its session id, as on the server
    history = WorkflowHistory.from_json(started.get("workflowId", path.stem), recorded)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"


def test_there_are_recorded_histories():
    assert len(HISTORIES) >= 3


# Activity classes are imported for typed references only (never run in the workflow).
ALLOWED_IMPORTS = {
    "__future__",
    "asyncio",
    "collections.abc",
    "typing",
    "datetime",
    "temporalio",
    "durable_agents.activities.contracts",
    "durable_agents.activities.events",  # EventActivities (record_events), referenced only
    "durable_agents.activities.approvals",
    "durable_agents.activities.approval_policy",  # PolicyDecisionActivities and their inputs, referenced only
    "durable_agents.activities.fork",
    "durable_agents.activities.migrate",  # MigrateActivities (migrate_session), referenced only
    "durable_agents.activities.policies",  # PolicyActivities (change_approval_policy) and its request models
    "durable_agents.activities.replay",  # ReplayActivities (a batch's plan and input), referenced only
    "durable_agents.activities.model",
    "durable_agents.activities.budget_wait",  # the budget-wait signal's notice, the hand-off's failure type
    "durable_agents.activities.session",
    "durable_agents.activities.tools",
    "durable_agents.activities.subagent_activities",
    "durable_agents.activities.subagent_contracts",
    "durable_agents.checkpoint.events",  # the event models (pydantic): the outcome event a streamed run writes
    "durable_agents.checkpoint.errors",
    "durable_agents.checkpoint.fingerprint",
    "durable_agents.checkpoint.format",
    "durable_agents.checkpoint.pricing",  # data and arithmetic (usage limits)
    "durable_agents.activities.metrics",  # counters through workflow.metric_meter(), which skips replays
    "durable_agents.workflows",
    "pydantic",
    "json",  # Current Details show a pending call's arguments as JSON
}
BANNED_CALLS = {"now", "utcnow", "time", "uuid4", "random", "sleep", "wait"}


def _module_root_allowed(name: str) -> bool:
    return any(name == a or name.startswith(a + ".") for a in ALLOWED_IMPORTS)


@pytest.mark.parametrize("path", sorted((ROOT / "workflows").glob("*.py")), ids=lambda p: p.name)
def test_workflow_modules_import_only_deterministic_code(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        for name in names:
            assert _module_root_allowed(name), f"{path.name}:{node.lineno} imports {name}"
        if isinstance(node, ast.ImportFrom) and node.module == "datetime":
            assert {a.name for a in node.names} <= {"timedelta"}, f"{path.name}: only timedelta from datetime"
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in {"asyncio", "time", "datetime", "random", "uuid"}
        ):
            assert node.attr not in BANNED_CALLS, f"{path.name}:{node.lineno} uses {node.value.id}.{node.attr}"
