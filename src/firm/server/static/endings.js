// A subtree's cancel is one log entry on its top task: {reason, by, ended: n, ended_sha256}
// (firm/endings.py). The page's readers turn it into one `cancelled` event per task it ended
// before their reducers see it, so state, replay, timeline and critical path read what the
// per-task entries of older logs said (those pass through as they are). The tasks it ended are
// those open under the top at that entry, which is what a reader's model holds there: the log is
// in commit order, so the entries before it are exactly what the cancel's UPDATE saw.

import { KIND } from "./kinds.js";
import { OPEN } from "./util.js";

/** Whether an event is a whole subtree's cancel (it does not list its tasks). */
export function endsMany(e) {
  return e.kind === KIND.CANCELLED && e.data?.ended_sha256 !== undefined;
}

/**
 * The event as reducers read it: itself, or for a subtree's cancel one `cancelled` event per
 * task it ended, the top first. `tree` is the reader's model at that entry:
 * {children(id) → ids, status(id) → status, agent(id) → agent id}.
 */
export function endings(e, tree) {
  if (!endsMany(e)) return [e];
  const said = { reason: e.data.reason ?? "", by: e.data.by ?? "" };
  const out = [];
  const seen = new Set();
  const stack = [e.task_id];
  while (stack.length) {
    const id = stack.pop();
    if (seen.has(id)) continue;
    seen.add(id);
    if (OPEN.has(tree.status(id))) out.push({ ...e, task_id: id, agent: tree.agent(id) ?? null, data: said, under: e.task_id });
    for (const child of tree.children(id) ?? []) stack.push(child);
  }
  return out;
}
