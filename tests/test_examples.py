"""Every scenario in ``examples/`` runs as its README says, and does what it says it shows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXPECTED = {
    "approvals": [
        "ticket-1: stop",  # a small refund needs no approval
        "ticket-2: awaiting-approval refund {'order': 'A-7', 'amount_cents': 12000}",
        '"refunded_cents": 8000',  # approved with edited arguments: the edit ran
        'ticket-3: stop Done: {"error": "rejected by a human reviewer", "note": "sent a new one"}',
        "refunds made: [1500, 8000]",  # the rejected refund never ran
    ],
    "subagents": [
        "stop New this release: it ships durably and waits days for approvals.",
        "session launch-1/3 of researcher under launch-1",
        "session launch-1/5 of writer under launch-1",
    ],
    "fork_and_diff": [
        "dinner: Booked: terrace",
        "dinner.fork-1: Booked: inside",  # the patched forecast took the other path
        "diverged at step 1",
        "['book_terrace'] | ['book_inside']",
    ],
}


def test_every_example_folder_is_run_here_and_has_a_readme():
    folders = {p.name for p in EXAMPLES.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    assert {name for name in folders if (EXAMPLES / name / "main.py").exists()} == set(EXPECTED)
    for name in folders:
        readme = (EXAMPLES / name / "README.md").read_text()
        assert f"examples/{name}/" in readme, name  # the command that runs it
        assert f"[{name}]({name}/)" in (EXAMPLES / "README.md").read_text()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_an_example_runs_as_its_readme_says(name: str, tmp_path: Path):
    ran = subprocess.run(
        [sys.executable, str(EXAMPLES / name / "main.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    for line in EXPECTED[name]:
        assert line in ran.stdout, (line, ran.stdout)
