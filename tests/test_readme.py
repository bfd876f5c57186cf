"""The Python snippets of the docs and of the README, run as written.

Two projects, each run the same way:

- **the tour** (``TOUR``): docs/tutorial.md, then the how-to pages with Python blocks,
  in the site's order, make one project (``myapp/``). Their ``file=`` blocks are written
  into a fresh folder; ``durable-agents worker --agent myapp.agents:booker --agent
  myapp.team:planner`` runs there (cwd and PYTHONPATH = the project) against the
  session's Temporal dev server, offline as the tutorial promises: its agents play
  ``scripted:`` models, and the worker has no provider key or URL. The ``client`` blocks
  run in page order in a separate process (``tests/readme_snippets.py``) with
  ``TEMPORAL_ADDRESS`` set, so
  ``AgentClient.connect(store=SqliteStore(".durable-agents/store.db"))`` reaches the same
  server and store. Then how-to/temporal-app.md's plain-temporalio worker runs one more
  session; then the pages' ``durable-agents`` commands (``<!-- readme-test: cli -->`` sh
  blocks) run in page order, each a process of the installed ``durable-agents`` in the
  project, against the same worker: the same Temporal address (``TEMPORAL_ADDRESS``) and
  store (``DURABLE_AGENTS_STORE``), the worker's task queue given as the global
  ``--task-queue`` flag (the one thing a reader's page does not say: the test's worker has a
  fresh queue); each must exit 0. They run after all the client blocks, not interleaved:
  the commands use sessions of their own (the tutorial's ``chat-41``, streaming.md's
  ``chat-45``), and after the client blocks the booker has no approval policy again (the
  approval-policies page clears it), so ``run`` pauses for a person as the tutorial says.
  Then the pages' test files (how-to/testing.md, how-to/replay.md) run with
  pytest in the project, as a reader runs them. The checks are what a reader relies on:
  the run pauses for approval, approving continues it, the card is charged once, the
  session goes on, fork and inspect work, a sub-agent's approval pauses its parent, a
  stream replays, the pages' tests pass; and from the command line: ``run`` pauses on
  ``chat-41``'s deposit, ``approvals`` lists it, ``approve`` books the table, ``run --json``
  goes on, ``show`` names the call ids, ``fork … --resume`` makes a fork whose run differs
  (rain: no deposit), ``diff`` names the divergence, ``watch`` prints the outcome.
- **the README's example** (``quickstart/``): its agent, a worker for it (its real
  Anthropic SDK pointed at ``FakeLLMServer``), and its client block: the run pauses for
  approval, approving books the table once.

Every process these tests start is started by ``start_worker`` or ``run_in_project``, from
durable-agents as a user installs it: the wheel, built and installed into a fresh venv
(the ``installed`` fixture, tests/installed_wheel.py), not the checkout's editable install.

Every other page of docs/ has no Python block (a test says so), so none goes untested;
the ``temporal-cli`` blocks run in tests/outside_clients/test_doc_cli_snippets.py. On
every tour page a sh block of ``durable-agents`` commands is either run (``cli``) or marked
``shell-synopsis`` with the reason it cannot run as typed (a test says so). Those left as
synopses: the tutorial's server/worker block and its real-model worker line (long-running,
or a real key); approval-policies.md's grant example on ``chat-41`` (nothing waits there by
then: the client block above it runs the same decision), its policy commands and
backtests (they need the reader's ``deposits.json``, a grant id, and an agent-wide policy
that would change the tour's later runs); replay.md's replay/fork batches and export (they
name the reader's sessions, an ``agents_v2`` module and a ``replay-worker`` that runs until
stopped). Pages outside the tour are not run: how-to/approvals.md (its lines are
alternative decisions of one pause: approve, approve with edits, reject), how-to/web-inbox.md
(a long-running web server and curl against it), the production pages (deployments,
encryption keys, services the tour has none of).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agents.checkpoint import CheckpointStatus, Role, SqliteStore
from tests.fakes.llm_server import FakeLLMServer
from tests.installed_wheel import Installed
from tests.readme_snippets import (
    Block,
    CliBlock,
    ReadmeMarkerError,
    cli_blocks,
    compile_block,
    parse,
    parse_pages,
    temporal_cli_blocks,
    write_project,
)

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
TOUR = [
    DOCS / page
    for page in (
        "tutorial.md",
        "how-to/providers.md",
        "how-to/context.md",
        "how-to/multimodal.md",
        "how-to/approval-policies.md",
        "how-to/structured-output.md",
        "how-to/mcp.md",
        "how-to/hooks.md",
        "how-to/subagents.md",
        "how-to/streaming.md",
        "how-to/temporal-app.md",
        "how-to/testing.md",
        "how-to/replay.md",
    )
]
"""The pages whose blocks make the tour's one project, in order (the site's order)."""
RUNNER = Path(__file__).resolve().parent / "readme_snippets.py"
API_KEY = "readme-test-key"
MAX_SKIPS = 2
"""Skipped blocks are the exception: each one is a snippet nobody runs."""


def tour_blocks() -> list[Block]:
    return parse_pages(TOUR, ROOT)


def readme_blocks() -> list[Block]:
    return parse_pages([README], ROOT)


def tour_cli_blocks() -> list[CliBlock]:
    """The tour's ``durable-agents`` command blocks, in the pages' order (strict: see ``cli_blocks``)."""
    return [block for page in TOUR for block in cli_blocks(page.read_text(), page.relative_to(ROOT).as_posix())]


# -- the markers (no server) -------------------------------------------------------------
@pytest.mark.parametrize("project", ["tour", "readme"])
def test_every_python_block_is_marked_and_compiles(project: str):
    blocks = tour_blocks() if project == "tour" else readme_blocks()
    kinds = [b.kind for b in blocks]
    assert kinds.count("file") >= 1 and kinds.count("client") >= 1, kinds
    assert kinds.count("skip") <= MAX_SKIPS, [b.reason for b in blocks if b.kind == "skip"]
    for block in blocks:
        if block.kind == "skip" or not block.is_python:
            continue
        compile_block(block, block.doc)  # a SyntaxError names the page and line
        first = block.code.splitlines()[0]
        if block.kind == "file" and first.startswith("# ") and first.split()[1].endswith(".py"):
            assert first.split()[1] == block.path, f"{block.doc}:{block.line}: comment names another file"


def test_every_docs_page_with_python_blocks_is_run():
    """A page outside the tour may hold no Python block: it would go untested."""
    pages = sorted(DOCS.rglob("*.md"))
    assert len(pages) >= 20, pages
    with_blocks = {page for page in pages if parse_pages([page], ROOT)}
    assert with_blocks <= set(TOUR), sorted(str(p.relative_to(ROOT)) for p in with_blocks - set(TOUR))
    assert all(parse_pages([page], ROOT) for page in TOUR), "a tour page without blocks: take it out of TOUR"


def test_every_durable_agents_sh_block_of_the_tour_is_run_or_a_synopsis():
    """An unmarked sh block of ``durable-agents`` commands on a tour page fails here, so a new
    one cannot go untested by accident; the tutorial's commands are run, not only listed."""
    blocks = tour_cli_blocks()
    tutorial = [b for b in blocks if b.doc == "docs/tutorial.md"]
    commands = [argv[1] for b in tutorial for argv in b.commands]
    for command in ("run", "approvals", "approve", "sessions", "show", "history", "fork", "diff", "watch"):
        assert command in commands, f"the tutorial's {command!r} command is not in a cli block: {commands}"
    assert all(argv[0] == "durable-agents" for b in blocks for argv in b.commands)


def test_the_api_reference_lists_every_public_name():
    import durable_agents

    listed = re.findall(r"^::: durable_agents\.(\w+)$", (DOCS / "reference" / "api.md").read_text(), re.M)
    assert sorted(listed) == sorted(durable_agents.__all__)


def test_the_parser_refuses_unmarked_or_badly_marked_blocks():
    fine = '<!-- readme-test: client -->\n```python\nx = 1\n```\n\n<!-- readme-test: skip reason="a fragment" -->\n'
    fine += "```py\nasync def f(): ...\n```\n\n- item\n\n  <!-- readme-test: file=pkg/m.py -->\n  ```python\n  y = 2\n  ```\n"
    fine += "\n<!-- readme-test: file=pyproject.toml -->\n```toml\n[tool.pytest.ini_options]\n```\n"
    kinds = [(b.kind, b.path, b.reason, b.code, b.line) for b in parse(fine)]
    assert kinds == [
        ("client", None, None, "x = 1\n", 3),
        ("skip", None, "a fragment", "async def f(): ...\n", 8),
        ("file", "pkg/m.py", None, "y = 2\n", 15),
        ("file", "pyproject.toml", None, "[tool.pytest.ini_options]\n", 20),
    ]
    assert [b.is_python for b in parse(fine)] == [True, True, True, False]
    assert parse("```sh\nmake test\n```\n") == []  # only python blocks need a marker
    bad = {
        "```python\nx = 1\n```\n": "without a readme-test marker",
        "<!-- readme-test: skip -->\n```python\nx\n```\n": "needs a reason",
        '<!-- readme-test: skip reason="" -->\n```python\nx\n```\n': "needs a reason",
        "<!-- readme-test: file=/etc/x.py -->\n```python\nx\n```\n": "relative path",
        "<!-- readme-test: file=setup.cfg -->\n```ini\nx\n```\n": "a .py or .toml file",
        "<!-- readme-test: file=pyproject.toml -->\n```python\nx\n```\n": "goes before a toml block",
        "<!-- readme-test: file=x.py -->\n```toml\nx\n```\n": "before a toml block",
        "<!-- readme-test: run -->\n```python\nx\n```\n": "unknown readme-test marker",
        "<!-- readme-test: client -->\nSome text.\n```python\nx\n```\n": "without a python block",
        "<!-- readme-test: client -->\n```sh\nls\n```\n": "before a sh block",
        "text\n<!-- readme-test: client -->\n": "without a python block",
        "<!-- readme-test: temporal-cli -->\n```python\nx\n```\n": "goes before a sh block, not a python block",
        "<!-- readme-test: temporal-cli -->\n```json\n{}\n```\n": "before a json block, not sh",
        "<!-- readme-test: temporal-cli -->\nSome text.\n": "without a sh block",
        "<!-- readme-test: temporal-cli -->\n```sh\nls -l\n```\n": "temporal commands only",
        "<!-- readme-test: temporal-cli -->\n```sh\ntemporal workflow list \\\n```\n": "backslash-continued",
        "<!-- readme-test: temporal-cli -->\n```sh\ntemporal workflow list --query 'x\n```\n": "unreadable",
    }
    for text, needle in bad.items():
        with pytest.raises(ReadmeMarkerError, match=needle):
            parse(text)


def test_cli_blocks_are_read_as_commands_and_unmarked_ones_refused():
    text = "Intro.\n\n<!-- readme-test: cli -->\n```sh\n"
    text += '.venv/bin/durable-agents run booker "Book a table" --session chat-41   # pauses\n'
    text += 'durable-agents fork chat-41 --from-step 1 \\\n  --tool-result \'call_2_0={"forecast": "rain"}\'\n```\n'
    text += '\n<!-- readme-test: shell-synopsis reason="long-running" -->\n```sh\ndurable-agents worker\n```\n'
    text += "\n```sh\nmake test\n```\n"  # an unmarked sh block without durable-agents is documentation
    (block,) = cli_blocks(text, "doc.md")
    assert block.commands == [
        ["durable-agents", "run", "booker", "Book a table", "--session", "chat-41"],
        ["durable-agents", "fork", "chat-41", "--from-step", "1", "--tool-result", 'call_2_0={"forecast": "rain"}'],
    ]
    assert (block.kind, block.doc, block.line, block.lines) == ("cli", "doc.md", 5, [5, 6])
    assert parse(text) == [] and temporal_cli_blocks(text) == []
    bad = {
        # a new durable-agents snippet without a marker: it would go untested
        "```sh\n.venv/bin/durable-agents approvals\n```\n": "without a readme-test marker",
        "```bash\nANTHROPIC_API_KEY=x durable-agents worker --agent m:a\n```\n": "without a readme-test marker",
        "<!-- readme-test: shell-synopsis -->\n```sh\ndurable-agents dev\n```\n": "needs a reason",
        "<!-- readme-test: cli -->\n```python\nx\n```\n": "goes before a sh block",
        "<!-- readme-test: cli -->\n```sh\nls\n```\n": "durable-agents commands only",
        "<!-- readme-test: cli -->\n```sh\ndurable-agents sessions [--agent booker]\n```\n": "placeholders",
        "<!-- readme-test: cli -->\n```sh\ndurable-agents resume | cancel\n```\n": "placeholders",
        "<!-- readme-test: cli -->\n```sh\ndurable-agents show <session>\n```\n": "placeholders",
        "<!-- readme-test: cli -->\n```sh\ndurable-agents approve chat-41 --note …\n```\n": "placeholders",
        "<!-- readme-test: cli -->\n```sh\n# nothing\n```\n": "without a command",
    }
    for text, needle in bad.items():
        with pytest.raises(ReadmeMarkerError, match=needle):
            cli_blocks(text, "doc.md")
    # outside cli_blocks (the python blocks' parse, other pages) an unmarked sh block is no error
    assert parse("```sh\ndurable-agents approvals\n```\n") == []


def test_temporal_cli_blocks_are_read_as_commands():
    text = "Intro.\n\n<!-- readme-test: temporal-cli -->\n```sh\n"
    text += 'temporal workflow start --workflow-id w-1 \\\n  --input \'{"a": "b c"}\'   # starts it\n'
    text += '\n# a comment line\ntemporal workflow result --workflow-id w-1  # {"finishReason": …}\n```\n'
    text += "\n```sh\nmake test\n```\n"  # an unmarked sh block is documentation, not a snippet
    (block,) = temporal_cli_blocks(text, "doc.md")
    assert block.commands == [
        ["temporal", "workflow", "start", "--workflow-id", "w-1", "--input", '{"a": "b c"}'],
        ["temporal", "workflow", "result", "--workflow-id", "w-1"],
    ]
    assert (block.line, block.lines) == (5, [5, 9])
    assert parse(text) == []  # parse() gives the python blocks only
    for doc in (README, DOCS / "tutorial.md", ROOT / "durable_agents" / "contract" / "wire-contract.md"):
        blocks = temporal_cli_blocks(doc.read_text(), doc.name)
        assert blocks and all(b.commands[0][:3] == ["temporal", "workflow", "start"] for b in blocks), blocks


# -- the tour, run (a Temporal server, a worker process, a client process) ---------------
def project_env(installed: Installed, project: Path, **extra: str) -> dict[str, str]:
    """The install's environment (its ``bin`` first on PATH) minus anything that would point
    the snippets elsewhere."""
    dropped = ("PYTHONPATH", "PYTHONSAFEPATH", "ANTHROPIC_", "OPENAI_", "TEMPORAL_", "DURABLE_AGENTS_")
    env = {k: v for k, v in installed.env().items() if not k.startswith(dropped)}
    return {**env, "PYTHONPATH": str(project), **extra}


def start_worker(cmd: list[str], project: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=project, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while "worker for" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            pytest.fail(f"the snippets' worker did not start:\n{log.read_text()}")
        time.sleep(0.1)
    return proc


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def tool_results(store: SqliteStore, session_id: str) -> list[tuple[str, object]]:
    return [
        (m.tool_name, json.loads(m.content or "null")) for m in store.load(session_id).messages if m.role == Role.TOOL
    ]


@dataclass
class SnippetRun:
    """What one project's client process did, and what to print when a check fails."""

    trace: dict
    stdout: str
    requests: list[dict]
    """The Anthropic requests the worker's SDK sent to the fake (none when run offline)."""
    store_path: Path
    context: str
    project: Path
    commands: list[CliRun]
    """The pages' ``durable-agents`` commands as they ran, in order."""


@dataclass
class CliRun:
    """One ``durable-agents`` command of a page, run."""

    where: str
    """``page:line``."""
    argv: list[str]
    """As the page has it (``durable-agents …``)."""
    stdout: str
    stderr: str


CLI_WAIT = 120.0
"""Seconds one command of a page may take (``run`` and ``approve`` wait for the run's outcome)."""


def run_cli_blocks(
    installed: Installed, blocks: list[CliBlock], project: Path, env: dict[str, str], task_queue: str, log: Path
) -> list[CliRun]:
    """Each command of ``blocks`` in order, as the installed ``durable-agents`` in the project,
    the worker's task queue as the global ``--task-queue`` flag; each must exit 0."""
    ran: list[CliRun] = []
    for block in blocks:
        for argv, line in zip(block.commands, block.lines, strict=True):
            where = f"{block.doc}:{line}"
            cmd = [str(installed.cli), "--task-queue", task_queue, *argv[1:]]
            try:
                done = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=CLI_WAIT)
            except subprocess.TimeoutExpired as e:
                pytest.fail(
                    f"{where}: `{shlex.join(argv)}` hung:\n{e.stdout}\n{e.stderr}\n--- worker ---\n{log.read_text()}"
                )
            if done.returncode != 0:
                pytest.fail(
                    f"{where}: `{shlex.join(argv)}` exited {done.returncode}:\n--- stdout ---\n{done.stdout}"
                    f"\n--- stderr ---\n{done.stderr}\n--- worker log ---\n{log.read_text()[-4000:]}",
                    pytrace=False,
                )
            ran.append(CliRun(where, argv, done.stdout, done.stderr))
    return ran


def run_in_project(
    installed: Installed, args: list[str], project: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess:
    """``python args`` of the install, in the project, as a reader runs it there (output captured)."""
    return subprocess.run(
        [str(installed.python), *args], cwd=project, env=env, capture_output=True, text=True, timeout=timeout
    )


def run_snippets(
    env: WorkflowEnvironment,
    installed: Installed,
    tmp_path: Path,
    pages: list[Path],
    agents: list[str],
    replies: Callable[[FakeLLMServer], None] | None = None,
    plain: list[str] | None = None,
    commands: list[CliBlock] | None = None,
) -> SnippetRun:
    """Write the pages' ``file=`` blocks into a project, start ``durable-agents worker`` for
    ``agents`` there, run the pages' ``client`` blocks in a client process (then ``plain``:
    ``[MODULE:FUNC, SESSION, TEXT]`` for a plain-temporalio worker's run), stop the worker.
    ``replies``: what a ``FakeLLMServer`` answers, for pages whose agents call Anthropic;
    None: the worker gets no provider key or URL at all (the pages run offline).
    ``commands``: ``cli`` blocks to run after the client process, on the same worker."""
    project = tmp_path / "project"
    project.mkdir()
    write_project(parse_pages(pages, ROOT), project)
    address = env.client.service_client.config.target_host
    task_queue = f"readme-{uuid.uuid4().hex[:8]}"
    store_path = project / ".durable-agents" / "store.db"
    log, trace_path = tmp_path / "worker.log", tmp_path / "trace.json"

    with contextlib.ExitStack() as stack:
        llm = stack.enter_context(FakeLLMServer()) if replies is not None else None
        if llm is not None and replies is not None:
            replies(llm)
        fake_env = {"ANTHROPIC_BASE_URL": llm.anthropic_base_url, "ANTHROPIC_API_KEY": API_KEY} if llm else {}
        worker_cmd = [
            str(installed.cli),
            *("--address", address, "--task-queue", task_queue, "--store", f"sqlite:///{store_path}"),
            "worker",
            *(arg for agent in agents for arg in ("--agent", agent)),
        ]
        worker = start_worker(worker_cmd, project, project_env(installed, project, **fake_env), log)
        try:
            client_args = ["-P", str(RUNNER), str(ROOT)]
            client_args += [os.pathsep.join(str(p.relative_to(ROOT)) for p in pages), str(trace_path), task_queue]
            client_args += ["--plain", *plain] if plain else []
            client_env = project_env(installed, project, TEMPORAL_ADDRESS=address, **fake_env)
            try:
                ran = run_in_project(installed, client_args, project, client_env, timeout=300)
            except subprocess.TimeoutExpired as e:
                pytest.fail(f"the client snippets hung:\n{e.stdout}\n{e.stderr}\n--- worker ---\n{log.read_text()}")
            requests = [r for r in llm.requests if r["path"] == "/v1/messages"] if llm else []
            if ran.returncode == 0 and commands:
                cli_env = {**client_env, "DURABLE_AGENTS_STORE": f"sqlite:///{store_path}"}
                cli_runs = run_cli_blocks(installed, commands, project, cli_env, task_queue, log)
            else:
                cli_runs = []
        finally:
            stop(worker)

    trace = trace_path.read_text() if trace_path.exists() else "(no trace)"
    context = (
        f"\n--- client stdout ---\n{ran.stdout}\n--- client stderr ---\n{ran.stderr}"
        f"\n--- worker log ---\n{log.read_text()}\n--- trace ---\n{trace[-4000:]}"
    )
    exit_code = ran.returncode  # (not ran.returncode in the assert: pytest would print all of ran)
    assert exit_code == 0, f"the client snippets failed (exit {exit_code}){context}"
    return SnippetRun(json.loads(trace), ran.stdout, requests, store_path, context, project, cli_runs)


def test_the_docs_tour_runs_as_written(env: WorkflowEnvironment, installed: Installed, tmp_path: Path):
    run = run_snippets(
        env,
        installed,
        tmp_path,
        TOUR,
        ["myapp.agents:booker", "myapp.team:planner"],
        plain=["myapp.temporal_app:run_worker", "chat-43", "Is it sunny in Rome tomorrow?"],
        commands=tour_cli_blocks(),
    )
    try:
        check_tour(run.trace, run.stdout, run.store_path)
        check_commands(run.commands, run.store_path)
    except (AssertionError, LookupError, ValueError, TypeError) as e:  # a check failed, or the trace lacks a part
        raise AssertionError(f"{type(e).__name__}: {e}{run.context}") from e
    check_page_tests(installed, run.project)


def test_the_readme_example_runs_as_written(env: WorkflowEnvironment, installed: Installed, tmp_path: Path):
    def replies(llm: FakeLLMServer) -> None:
        llm.anthropic.reply_tool_calls([("book_table", {"restaurant": "Roscioli", "people": 2}, "toolu_1")])
        llm.anthropic.reply_text("Booked: Roscioli, for 2.")

    run = run_snippets(env, installed, tmp_path, [README], ["quickstart.agents:booker"], replies)
    try:
        (entry,) = [b for b in run.trace["blocks"] if "client.send(" in b["code"]]
        result = entry["result"]
        assert (result["session_id"], result["finish_reason"]) == ("quick-1", "stop"), result
        assert result["messages"][-1]["content"] == "Booked: Roscioli, for 2."
        assert run.stdout.startswith("awaiting-approval book_table {'restaurant': 'Roscioli', 'people': 2}"), run.stdout
        assert "stop Booked: Roscioli, for 2." in run.stdout, run.stdout
        store = SqliteStore(run.store_path)
        try:
            booked = tool_results(store, "quick-1")
        finally:
            store.close()
        assert [(name, result["booked"]) for name, result in booked] == [("book_table", "Roscioli")], booked
        assert len(run.requests) == 2, run.requests
        keys = [r["headers"].get("x-api-key") or r["headers"].get("authorization", "") for r in run.requests]
        assert all(API_KEY in key for key in keys), keys  # the worker's environment, as the README says
    except (AssertionError, LookupError, ValueError, TypeError) as e:
        raise AssertionError(f"{type(e).__name__}: {e}{run.context}") from e


def check_tour(trace: dict, stdout: str, store_path: Path) -> None:
    def after(call: str) -> dict:
        entry = next(b for b in trace["blocks"] if call in b["code"])  # the first block that makes the call
        return entry["result"]

    # send(): the run checks the weather, then pauses on the charge, which needs approval
    paused = after("client.send(")
    assert paused["finish_reason"] == "awaiting-approval" and paused["approval_id"], paused
    assert stdout.startswith("awaiting-approval 2 Clear skies: a table outside. The deposit first.\n"), stdout
    assert "\ncharge_card {'amount_cents': 4000}\n" in stdout, stdout
    # approve(): the same run goes on to its end
    done = after("client.approve(")
    assert (done["session_id"], done["finish_reason"]) == ("chat-42", "stop"), done
    assert "\nstop Booked: a table for 2 tonight, deposit paid (receipt r-1).\n" in stdout, stdout
    # a second send() on the finished session goes on with it
    assert "\nstop Clear skies in Rome.\n" in stdout, stdout
    # fork on Temporal with the step-1 call's result patched (its id read from the session), then resume
    forked = after("client.resume(")
    assert (forked["session_id"], forked["finish_reason"]) == ("chat-42.fork-1", "stop"), forked
    assert "\nRain in Rome: shall I look for a table indoors?\n" in stdout, stdout
    # the store-only fork and compare
    names = trace["namespace"]
    assert names["made"]["session_id"] == "chat-42.fork-2"
    assert names["cmp"]["diverged_at"] == 2 and names["cmp"]["drift"]["step_count"] == {"a": 5, "b": 1}
    assert "\n2 a=5 b=1\n" in stdout, stdout
    # how-to/approval-policies.md: a rule, a grant, the auto mode's evaluator decided the deposits
    assert "\nallow-rule small-deposits True\n" in stdout, stdout
    assert "\nTrue 1\n" in stdout and "\nstop approve 0.95\n" in stdout, stdout
    # the plain-temporalio worker
    assert (trace["plain"]["session_id"], trace["plain"]["finish_reason"]) == ("chat-43", "stop")
    check_team(trace, stdout, store_path)
    check_replay(trace, stdout)

    store = SqliteStore(store_path)
    try:
        assert store.load("chat-42").status == CheckpointStatus.FINISHED
        assert any(e.status == CheckpointStatus.AWAITING_APPROVAL for e in store.history("chat-42"))
        receipt = {"receipt": "r-1", "amount_cents": 4000}  # the stand-in's first and only charge
        weather = ("get_weather", {"city": "Rome", "forecast": "clear"})
        assert tool_results(store, "chat-42") == [weather, ("charge_card", receipt), weather]
        charges = [
            result
            for summary in store.list_sessions()
            # how-to/approval-policies.md's own deposits, and the command line's (check_commands)
            if not summary.session_id.startswith(("policy-", "chat-41"))
            for name, result in tool_results(store, summary.session_id)
            if name == "charge_card"
        ]
        assert charges == [receipt], charges  # forks start before the charge and never repeat it
        assert tool_results(store, "chat-42.fork-1") == [("get_weather", {"city": "Rome", "forecast": "rain"})]
        assert store.load("chat-42.fork-2").status == CheckpointStatus.IN_PROGRESS
        # offline, as the tutorial says: every model turn of the tour's booker was the script's
        models = {store.load(s).run_config.model for s in ("chat-42", "chat-42.fork-1", "chat-43", "chat-44")}
        assert models == {"scripted:booker"}, models
    finally:
        store.close()
    check_streaming(trace, stdout, store_path)


def check_page_tests(installed: Installed, project: Path) -> None:
    """The test files of how-to/testing.md and how-to/replay.md, run by real pytest in the
    project as the pages say (``python -m pytest tests`` from its root, its
    ``pyproject.toml``'s settings, no PYTHONPATH), after the tour exported the fixture."""
    assert (project / "tests" / "fixtures" / "runs.jsonl").is_file(), "replay.md's client block exports it"
    env = {k: v for k, v in project_env(installed, project).items() if k != "PYTHONPATH"}
    try:
        ran = run_in_project(installed, ["-m", "pytest", "-q", "tests"], project, env, timeout=600)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the pages' tests hung:\n{e.stdout}\n{e.stderr}")
    output = f"{ran.stdout}\n{ran.stderr}"
    exit_code = ran.returncode
    assert exit_code == 0, f"the pages' tests failed (exit {exit_code}):\n{output}"
    assert re.search(r"\b4 passed\b", ran.stdout), output


def test_every_file_block_imports_as_written(installed: Installed, tmp_path: Path):
    """Modules the tour's worker does not load (e.g. myapp/settings.py) still run as written."""
    blocks = tour_blocks()
    written = write_project(blocks, tmp_path)
    modules = [".".join(p.relative_to(tmp_path).with_suffix("").parts) for p in written if p.suffix == ".py"]
    assert "myapp.settings" in modules and "myapp.offline" in modules
    probe = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    ran = run_in_project(
        installed, ["-P", "-c", probe, *modules], tmp_path, project_env(installed, tmp_path), timeout=120
    )
    assert ran.returncode == 0, ran.stderr


def check_replay(trace: dict, stdout: str) -> None:
    """Replaying: both offline runs diverged at their answer (step 2), the same tools, scored 0."""
    report = trace["namespace"]["report"]
    assert (report["total"], report["diverged"], report["same_tools"]) == (2, 2, 2), report
    assert [(s["diverged_at"], s["scores"]) for s in report["sessions"]] == [(2, {"same_answer": 0.0})] * 2
    assert "2 of 2 replayed sessions changed (allowed: 0)" in stdout, stdout


STREAMED = "Checking the sky.\n[get_weather {'city': 'Rome'}]\nClear skies in Rome.\nstop\n"
"""What the Streaming page prints as chat-44 streams: the script's two turns and the call between."""


def check_streaming(trace: dict, stdout: str, store_path: Path) -> None:
    """The Streaming page: the text printed as it streamed, the run's end, the replay."""
    assert STREAMED in stdout, stdout
    count = int(stdout.split(STREAMED, 1)[1].split()[0])
    assert stdout.split(STREAMED, 1)[1].startswith(f"{count} True"), stdout
    store = SqliteStore(store_path)
    try:
        events = store.read_events("chat-44")
        assert len(events) == count and sum('"type":"text-delta"' in e.body for e in events) > 2
        assert store.load("chat-44").messages[-1].content == "Clear skies in Rome."
    finally:
        store.close()


def check_team(trace: dict, stdout: str, store_path: Path) -> None:
    """Sub-agents: the reserver's approval paused the planner; approving the planner went on."""
    (entry,) = [b for b in trace["blocks"] if 'client.send("planner"' in b["code"]]
    team = entry["result"]
    assert (team["session_id"], team["finish_reason"], team["messages"][-1]["content"]) == (
        "team-1",
        "stop",
        "All set.",
    )
    assert "team-1/4 book_table {'restaurant': 'Roscioli', 'people': 2}" in stdout, stdout
    store = SqliteStore(store_path)
    try:
        assert tool_results(store, "team-1") == [
            ("scout", {"result": "Clear skies in Rome.", "subagentSessionId": "team-1/3"}),
            ("reserve", {"result": "Booked.", "subagentSessionId": "team-1/4"}),
        ]
        assert tool_results(store, "team-1/4") == [("book_table", {"booked": "Roscioli", "people": 2})]
        assert store.load_header("team-1/4").parent_session_id == "team-1"
    finally:
        store.close()


def check_commands(commands: list[CliRun], store_path: Path) -> None:
    """What a reader of the pages' ``durable-agents`` commands relies on (each exited 0)."""

    def output(*prefix: str) -> str:
        """The stdout of the first command that starts ``durable-agents *prefix``."""
        found = [c for c in commands if c.argv[1 : 1 + len(prefix)] == list(prefix)]
        assert found, f"no `durable-agents {' '.join(prefix)}` command ran: {[c.argv for c in commands]}"
        return found[0].stdout

    def said(text: str, *prefix: str) -> None:
        out = output(*prefix)
        assert text in out, f"`durable-agents {' '.join(prefix)}` did not print {text!r}:\n{out}"

    # the tutorial: run pauses on chat-41's deposit, approvals lists it, approve books the table
    said("awaiting-approval", "run", "booker", "Book a table for 2 tonight")
    said("charge_card", "run", "booker", "Book a table for 2 tonight")
    said("chat-41", "approvals")
    said("charge_card", "approvals")
    said("Booked: a table for 2 tonight, deposit paid (receipt r-", "approve", "chat-41")
    # run --json goes on with the finished session
    went_on = json.loads(output("run", "booker", "Will it stay dry after dinner?"))
    assert (went_on["sessionId"], went_on["finishReason"], went_on["messages"][-1]["content"]) == (
        "chat-41",
        "stop",
        "Clear skies in Rome.",
    ), went_on
    said("chat-41", "sessions")
    said("[call_2_0]", "show", "chat-41")  # the id the fork names
    assert json.loads(output("show", "chat-41", "--json"))["sessionId"] == "chat-41"
    said("Rain in Rome: shall I look for a table indoors?", "fork", "chat-41")
    said("chat-41.fork-1", "fork", "chat-41")
    said("diverged at step 1 (a: 5 steps, b: 2 steps)", "diff", "chat-41", "chat-41.fork-1")  # the patched result
    said("Clear skies in Rome.", "watch", "chat-41")
    said("session chat-41: stop", "watch", "chat-41")
    # how-to/context.md: what a step's request carried
    said("step 3 (message 6) was sent 6 messages", "show", "chat-42", "--as-sent", "3")
    assert len(json.loads(output("show", "chat-42", "--as-sent", "3", "--json"))["messages"]) == 6
    # how-to/approval-policies.md: the audit names the person's decision and the rule's
    said("chat-41 charge_card [call_4_0] ✓ approved by", "approvals", "--decided")
    said("approved by allow rule 'small-deposits'", "approvals", "--decided")
    # how-to/streaming.md: the streamed run, then watch on it (finished: its outcome, and the end event)
    said("Clear skies in Rome.", "run", "booker", "Is it sunny in Rome tonight?")
    said("session chat-45: stop", "watch", "chat-45")
    last = json.loads(output("watch", "chat-45", "--events").splitlines()[-1])
    assert (last["type"], last["result"]["finishReason"]) == ("run-finished", "stop"), last
    store = SqliteStore(store_path)
    try:
        weather = ("get_weather", {"city": "Rome", "forecast": "clear"})
        ((_, receipt),) = [(n, r) for n, r in tool_results(store, "chat-41") if n == "charge_card"]
        assert tool_results(store, "chat-41") == [weather, ("charge_card", receipt), weather]
        assert tool_results(store, "chat-41.fork-1") == [("get_weather", {"city": "Rome", "forecast": "rain"})]
        assert store.load("chat-41.fork-1").status == CheckpointStatus.FINISHED
    finally:
        store.close()
