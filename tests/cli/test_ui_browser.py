"""A real browser (headless Chromium) opens the embedded server's Temporal UI for a run.

Chromium comes from ``scripts/ensure-chromium.sh`` (Debian ``chromium``, installed
with apt-get as root when missing). If it cannot be installed the test fails with
the reason: it is never skipped silently. Screenshots are kept in
``tests/artifacts/`` (gitignored).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from html import unescape
from pathlib import Path
from urllib.parse import unquote

import pytest

from durable_agents.devserver import DevServer, free_port
from tests.cli.conftest import ROOT, Cli, stop

pytestmark = pytest.mark.integration

ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM_ENV = "DURABLE_AGENTS_CHROMIUM"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=15000",
    "--window-size=1400,1000",
]


def chromium() -> str:
    """The chromium binary, installed by scripts/ensure-chromium.sh when missing (never a skip)."""
    if os.environ.get(CHROMIUM_ENV):
        return os.environ[CHROMIUM_ENV]
    if not shutil.which("chromium"):
        script = ROOT / "scripts" / "ensure-chromium.sh"
        done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            pytest.fail(
                f"headless Chromium is needed and could not be installed by {script}: "
                f"{(done.stderr or done.stdout).strip()}",
                pytrace=False,
            )
    found = shutil.which("chromium")
    if not found:
        pytest.fail(
            "headless Chromium is needed: `chromium` is still not on PATH after scripts/ensure-chromium.sh",
            pytrace=False,
        )
    return found


def browse(url: str, profile: Path, screenshot: Path) -> str:
    """The page's DOM after its scripts ran; saves a screenshot of it too.

    ``profile`` must be a fresh directory (a profile in use makes Chromium wait for its owner).
    """
    done = subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", f"--screenshot={screenshot}", url],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert screenshot.is_file() and screenshot.stat().st_size > 10_000, done.stderr[-2000:]
    return done.stdout


def visible_text(dom: str) -> str:
    dom = re.sub(r"<(script|style)\b[^>]*>.*?</\1>", " ", dom, flags=re.S)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", dom)).split())


def test_the_ui_page_of_a_finished_run_shows_its_summary(tmp_path):
    browser = chromium()  # first: a missing browser fails before anything starts
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("ui-web-*.png"):  # keep only this run's screenshots
        old.unlink()
    sid = f"web-{uuid.uuid4().hex[:8]}"
    # free ports, so a dev server of the user's on 7233/8233 is never in the way
    with DevServer(ui=True, db_file=tmp_path / "temporal.db", port=free_port(), ui_port=free_port()) as server:
        cli = Cli(address=server.address, task_queue="ui-check", store_path=tmp_path / "store.db")
        worker = cli.start_worker(["tests.agents:weather_agent"], tmp_path / "worker.log")
        try:  # the worker stays up: the UI asks it for the run's current details (a query)
            _check_the_run_in_the_ui(cli, server.ui_url, sid)
        finally:
            stop(worker)
    print(
        f"screenshots: {ARTIFACTS / f'ui-{sid}.png'} (summary), {ARTIFACTS / f'ui-{sid}-timeline.png'}"
        f" (chromium {browser})"
    )


def _check_the_run_in_the_ui(cli: Cli, ui_url: str, sid: str) -> None:
    out = cli("run", "booker", "Book a table for 2 tonight\nsomewhere sunny", "--session", sid, "--ui-url", ui_url)
    assert out.returncode == 0, out.stderr
    link = f"{ui_url}/namespaces/default/workflows/{sid}"
    assert f"Temporal UI: {link}" in out.stdout
    summary = "booker: Book a table for 2 tonight"  # "<agent>: <first line of input>"

    page = browse(link, cli.store_path.parent / "profile-1", ARTIFACTS / f"ui-{sid}-timeline.png")
    text = visible_text(page)
    assert sid in text and "Completed" in text and "AgentRun" in text, text[:2000]
    assert "model turn 1" in text and "tool book_table call_5_0" in text  # activity summaries
    run_id = re.search(rf"/workflows/{sid}/([0-9a-f-]{{36}})/", page).group(1)

    metadata = browse(
        f"{link}/{run_id}/user-metadata", cli.store_path.parent / "profile-2", ARTIFACTS / f"ui-{sid}.png"
    )
    # the summary and the current details are rendered in frames whose URL carries the text
    assert summary in unquote(metadata), visible_text(metadata)[:2000]
    assert "step 3 · stop" in unquote(metadata) and sid in visible_text(metadata)
