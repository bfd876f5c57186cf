"""A worker says which store it uses, as an absolute path: a relative --store depends
on the directory it was started in, and a client elsewhere would use another one."""

from __future__ import annotations

import subprocess
import time

from tests.cli.conftest import CLI


def test_the_worker_prints_its_stores_absolute_path(env, tmp_path):
    address = env.client.service_client.config.target_host
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*CLI, "--address", address, "--task-queue", "path-check", "--store", "sqlite:///relative/store.db",
             "worker", "--agent", "durable_agents.examples.booker:booker"],
            cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while "worker for" not in log.read_text() and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.2)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    line = next(x for x in log.read_text().splitlines() if x.startswith("worker for"))
    assert line.endswith(f"store {tmp_path / 'relative' / 'store.db'}")
