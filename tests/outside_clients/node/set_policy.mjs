// Sets an agent's approval policy with Temporal's Node client (@temporalio/client), as a
// user's Node service would: update-with-start of the `ApprovalPolicies` workflow's
// `set_policy` update (workflow id durable-agents.policies.agent.<agent>@<task queue>, as our client names it).
//
// Input: one JSON object on stdin:
//   {"clientDir": ".node-client folder", "address": "host:port", "namespace": "default",
//    "taskQueue": "...", "agent": "...", "request": {"policy": {...}, "changedBy": "...", "expectedVersion": 0},
//    "timeoutMs": 20000}
// Output: one JSON line: {"event": "stored", "stored": {...StoredPolicy}} or
//   {"event": "refused", "type": "<ApplicationError type>", "message"} (exit 0), or
//   {"event": "error", "message"} and exit code 2.
import { createRequire } from "node:module";
import path from "node:path";

async function readInput() {
  let text = "";
  for await (const chunk of process.stdin) text += chunk;
  return JSON.parse(text);
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

async function main() {
  const args = await readInput();
  const require = createRequire(path.join(args.clientDir, "package.json"));
  const { Client, Connection, WithStartWorkflowOperation } = require("@temporalio/client");
  const connection = await Connection.connect({ address: args.address });
  try {
    const client = new Client({ connection, namespace: args.namespace ?? "default" });
    const start = new WithStartWorkflowOperation("ApprovalPolicies", {
      workflowId: `durable-agents.policies.agent.${args.agent}@${args.taskQueue}`,
      taskQueue: args.taskQueue,
      args: [{ agent: args.agent }],
      workflowIdConflictPolicy: "USE_EXISTING",
    });
    const timeout = new Promise((_, reject) =>
      setTimeout(() => reject(new Error(`no answer within ${args.timeoutMs ?? 20000} ms`)), args.timeoutMs ?? 20000),
    );
    try {
      const stored = await Promise.race([
        client.workflow.executeUpdateWithStart("set_policy", { args: [args.request], startWorkflowOperation: start }),
        timeout,
      ]);
      emit({ event: "stored", stored });
    } catch (e) {
      let cause = e;
      while (cause && cause.cause && !cause.type) cause = cause.cause;
      if (cause && cause.type) emit({ event: "refused", type: cause.type, message: cause.message });
      else throw e;
    }
  } finally {
    await connection.close();
  }
  process.exit(0);
}

main().catch((e) => {
  emit({ event: "error", message: String(e && e.stack ? e.stack : e) });
  process.exit(2);
});
