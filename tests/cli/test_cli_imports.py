"""Commands that only read the store start without the Temporal SDK's client and worker
(``temporalio.client`` alone imports in ≈ 0.7 s); the ones that talk to Temporal import
them when they run. (``show`` reads Temporal's connection config for its UI link.)"""

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
heavy = ("temporalio.client", "temporalio.worker", "temporalio.workflow")
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
        assert ran == {"code": 0, "temporal": []}, command
    # a command that needs Temporal imports it (here: refused at once, nothing listens at this address)
    ran = _run("--store", url, "--address", "127.0.0.1:1", "cancel", "one")
    assert ran["code"] != 0 and ran["temporal"]
