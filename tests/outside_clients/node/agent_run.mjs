// Drives one AgentRun with Temporal's Node client (@temporalio/client), as a user's
// Node service would: start the workflow by name, poll the `pending_approval` query
// until it is non-null, signal `approve`, await the result.
//
// Input: one JSON object, as argv[2] or on stdin:
//   {"clientDir": ".node-client folder", "address": "host:port", "namespace": "default",
//    "taskQueue": "...", "workflowId": "...", "input": {...AgentRun input...},
//    "timeoutMs": 20000}
// Output: JSON lines on stdout, one per step:
//   {"event": "started", "runId"}, {"event": "pending", "pending"}, {"event": "signalled", "payload"},
//   {"event": "result", "result"}; on a failure {"event": "error", "step", "message"} and exit code 2.
import { createRequire } from "node:module";
import path from "node:path";

async function readInput() {
  if (process.argv[2]) return JSON.parse(process.argv[2]);
  let text = "";
  for await (const chunk of process.stdin) text += chunk;
  return JSON.parse(text);
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const args = await readInput();
  const require = createRequire(path.join(args.clientDir, "package.json"));
  const { Client, Connection } = require("@temporalio/client");
  const timeoutMs = args.timeoutMs ?? 20000;
  let step = "connect";
  const connection = await Connection.connect({ address: args.address });
  try {
    const client = new Client({ connection, namespace: args.namespace ?? "default" });

    step = "start";
    const handle = await client.workflow.start("AgentRun", {
      taskQueue: args.taskQueue,
      workflowId: args.workflowId,
      args: [args.input],
    });
    emit({ event: "started", runId: handle.firstExecutionRunId });

    step = "query pending_approval";
    const deadline = Date.now() + timeoutMs;
    let pending = null;
    let lastError = null;
    while (pending === null || pending === undefined) {
      if (Date.now() > deadline) {
        throw new Error(
          `pending_approval stayed null for ${timeoutMs} ms` + (lastError ? ` (last query error: ${lastError})` : ""),
        );
      }
      try {
        pending = await withTimeout(handle.query("pending_approval"), 5000, "query pending_approval");
      } catch (e) {
        lastError = String(e && e.message ? e.message : e);
      }
      if (pending === null || pending === undefined) await sleep(200);
    }
    emit({ event: "pending", pending });

    step = "signal approve";
    const payload = { approvalId: pending.approvalId, approved: true, decidedBy: "node-client" };
    await handle.signal("approve", payload);
    emit({ event: "signalled", payload });

    step = "result";
    const result = await withTimeout(handle.result(), timeoutMs, "handle.result()");
    emit({ event: "result", result });
  } catch (e) {
    emit({ event: "error", step, message: String(e && e.message ? e.message : e) });
    return 2;
  }
  await connection.close();
  return 0;
}

// Exit as soon as main ends: a query abandoned at its timeout must not outlive the script
// (stdout is a pipe: its writes are synchronous on Linux, nothing printed is lost).
main().then(
  (code) => process.exit(code),
  (e) => {
    emit({ event: "error", step: "setup", message: String(e && e.stack ? e.stack : e) });
    process.exit(2);
  },
);
