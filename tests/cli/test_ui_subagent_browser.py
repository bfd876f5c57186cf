"""The Temporal UI shows a sub-agent's run as a child of its parent's (headless Chromium,
as in test_ui_browser.py; screenshots kept in tests/artifacts/)."""

from __future__ import annotations

import re
import uuid
from urllib.parse import quote

import pytest

from durable_agents.devserver import DevServer, free_port
from tests.cli.conftest import Cli, stop
from tests.cli.test_ui_browser import ARTIFACTS, browse, chromium, visible_text

pytestmark = pytest.mark.integration


def test_the_ui_links_a_subagents_run_to_its_parents(tmp_path):
    chromium()  # first: a missing browser fails before anything starts
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("ui-subagent-*.png"):
        old.unlink()
    sid = f"team-{uuid.uuid4().hex[:8]}"
    child = f"{sid}/4"
    with DevServer(ui=True, db_file=tmp_path / "temporal.db", port=free_port(), ui_port=free_port()) as server:
        cli = Cli(address=server.address, task_queue="ui-team", store_path=tmp_path / "store.db")
        worker = cli.start_worker(["tests.subagent_agents:ALL"], tmp_path / "worker.log")
        try:
            assert cli("run", "lead", "Rome", "--session", sid).returncode == 0
            assert cli("approve", sid).returncode == 0
            ns = f"{server.ui_url}/namespaces/default/workflows"
            page = browse(f"{ns}/{quote(child, safe='')}", tmp_path / "p1", ARTIFACTS / "ui-subagent-child.png")
            text = visible_text(page)
            assert f"Parent Workflow {sid}" in text and "Workflow Type AgentRun" in text, text[-3000:]
            run_id = re.search(rf'href="[^"]*/workflows/{re.escape(sid)}/([0-9a-f-]{{36}})', page)
            assert run_id is not None, "no link from the child's page to its parent's"
            page = browse(f"{ns}/{quote(sid, safe='')}", tmp_path / "p2", ARTIFACTS / "ui-subagent-parent.png")
            text = visible_text(page)
            assert "Relationships 2" in text, text[-3000:]  # its two sub-agents' runs
            assert f"researcher (sub-agent of {sid})" in text and f"writer (sub-agent of {sid})" in text
            related = browse(
                f"{ns}/{quote(sid, safe='')}/{run_id.group(1)}/relationships",
                tmp_path / "p3",
                ARTIFACTS / "ui-subagent-relationships.png",
            )
            text = visible_text(related)  # the tree: the parent's run and its two children
            assert "Child Count 2" in text and f"AgentRun {sid}/3" in text and f"AgentRun {child}" in text, text[-3000:]
        finally:
            stop(worker)
