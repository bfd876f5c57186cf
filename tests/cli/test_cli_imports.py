"""Commands that only read the store start without the Temporal SDK's client and worker
(``temporalio.client`` alone imports in ≈ 0.7 s); the ones that talk to Temporal import
its client when they run, and only ``worker`` / ``dev`` import its worker. (``show`` reads
Temporal's connection config for its UI link.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from durable_agents.checkpoint import SqliteStore
from durable_agents.checkpoint.format import Checkpoint, Message

PROBE = """
import json, sys
from durable_agents.cli import main
code = main(sys.argv[1:])
heavy = ("temporalio", "temporalio.client", "temporalio.worker", "temporalio.workflow")
print(json.dumps({"code": code, "temporal": [m for m in heavy if m in sys.modules]}))
"""


def _run(*argv: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60)
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.unit
def test_store_only_commands_do_not_import_temporals_client_or_worker(tmp_path):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = SqliteStore(tmp_path / "store.db")
    for sid in ("one", "two"):
        store.save(Checkpoint(session_id=sid, agent="booker", messages=[Message.user("Book a table for 2")]))
    store.close()
    for command in (["sessions"], ["show", "one"], ["history", "one"], ["diff", "one", "two"], ["sessions", "--json"]):
        ran = _run("--store", url, *command)
        # not even the SDK's package (≈ 0.1 s), but for `show`'s connection config
        assert ran == {"code": 0, "temporal": ["temporalio"] if command[0] == "show" else []}, command
    # a command that needs Temporal imports it (here: refused at once, nothing listens at this address)
    ran = _run("--store", url, "--address", "127.0.0.1:1", "cancel", "one")
    assert ran["code"] != 0 and ran["temporal"]


def test_commands_that_talk_to_temporal_import_its_client_but_not_its_worker(env, tmp_path):
    """``approvals``, ``approve``, ``send``… build no worker: they connect without Temporal's
    worker module (nor ``DurableAgentsPlugin``, which needs it): ≈ 0.1 s of every such command."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    SqliteStore(tmp_path / "store.db").close()
    address = env.client.service_client.config.target_host
    for command, code in ((["approvals", "--json"], 0), (["approvals"], 0), (["cancel", "nobody"], 2)):
        ran = _run("--store", url, "--address", address, *command)
        assert ran["code"] == code, command  # cancel: no such session
        assert "temporalio.client" in ran["temporal"] and "temporalio.worker" not in ran["temporal"], command
