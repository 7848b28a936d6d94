// The critical path of a run: the chain of sessions (and waits on people) that decided when the
// run ended. Pure: it walks the model sessions.js builds from the event log.
//
// Walk back from the goal's last session, asking each time "what did this wait for?":
// - a task's later session waited on its wake: on the report whose result came last (follow
//   that report's last session), or on a person's decision (the wait itself is on the path,
//   then the session that asked), or on nothing left open (the session before it);
// - a task's first session waited on its delegation: follow the manager's session that
//   delegated it;
// - the goal's first session waited on nothing: the path begins there.
// While the goal is open, the walk starts from the oldest session still running instead.
// Time spent queued (a task ready, its agent busy) sits between two links of the chain.

/**
 * Returns {ids: Set of session/wait ids on the path, chain: those items from first to last,
 * links: Set of indexes into model.links that join two items of the chain}.
 */
export function criticalPath(model, rootId = null) {
  const empty = { ids: new Set(), chain: [], links: new Set() };
  const root = rootId ? model.tasks.get(rootId) : [...model.tasks.values()].find((t) => !t.parent);
  if (!root || !root.sessions.length) return empty;

  const byId = model.byId;
  const chain = [];
  const seen = new Set();
  let item = root.settledAt !== null ? root.sessions[root.sessions.length - 1] : frontier(model, root);
  while (item && !seen.has(item.id)) {
    seen.add(item.id);
    chain.push(item);
    item = before(model, byId, item);
  }
  chain.reverse();
  const ids = new Set(chain.map((x) => x.id));
  const links = new Set();
  model.links.forEach((link, i) => {
    if (ids.has(link.from) && ids.has(link.to)) links.add(i);
  });
  return { ids, chain, links };
}

/**
 * While the goal is still open, the path so far leads to the work in hand that has run the
 * longest (every open item ends "now"; the oldest of them is what holds the run up most).
 */
function frontier(model, root) {
  let best = null;
  for (const s of model.sessions) if (s.open && (!best || s.start < best.start)) best = s;
  return best ?? root.sessions[root.sessions.length - 1];
}

/** The item this one waited on, or null at the beginning of the run. */
function before(model, byId, item) {
  const t = model.tasks.get(item.task);
  if (item.person !== undefined) {
    // A wait on a person: before it, the session that asked.
    return item.after ? byId.get(item.after) ?? null : null;
  }
  const i = t.sessions.indexOf(item);
  if (i > 0) {
    const previous = t.sessions[i - 1];
    const wait = t.waits.find((w) => w.startSeq >= previous.startSeq && w.endSeq !== null && w.endSeq <= item.startSeq);
    if (!wait) return previous; // requeued: the interrupted session ran before this one
    const cause = wait.wokenBy;
    if (cause?.task) {
      const report = model.tasks.get(cause.task);
      if (report.sessions.length) return report.sessions[report.sessions.length - 1];
      return previous; // a report cancelled before it ever ran
    }
    if (cause?.person) return wait;
    return previous;
  }
  if (!t.parent) return null;
  const parent = model.tasks.get(t.parent);
  const link = model.links.find((l) => l.kind === "delegation" && l.to === item.id);
  return link ? byId.get(link.from) ?? null : parent?.sessions[0] ?? null;
}
