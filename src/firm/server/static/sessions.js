// A run's sessions, waits and hand-offs, read from its event log. Pure: no page, no clock of its
// own; the timeline view draws what this returns and critical_path.js walks it.
//
// A session is one stretch of work on a task: from `started` to whatever ended that stretch
// (completed, failed, cancelled, waiting when it handed work down or asked a person, requeued
// when its worker was lost). A wait is a task's stretch from `waiting` to `woken` (or to its
// cancel): on its reports, or on a person when calls await approval.

import { endings } from "./endings.js";
import { KIND } from "./kinds.js";

/** How a session ended, by the event that ended it. */
const SESSION_END = {
  [KIND.COMPLETED]: "done",
  [KIND.FAILED]: "failed",
  [KIND.CANCELLED]: "cancelled",
  [KIND.WAITING]: "handed",
  [KIND.REQUEUED]: "interrupted",
};
const SETTLED = new Set([KIND.COMPLETED, KIND.FAILED, KIND.CANCELLED]);

/**
 * Build the model of one run from its events (in log order).
 * `now` (seconds, same clock as the events) ends what is still open; it defaults to the last
 * event's time. Returns {start, end, tasks, sessions, waits, links, byId}:
 * - tasks: Map id -> {id, parent, agent, title, status, settledAt, settledSeq, sessions, waits}
 * - sessions: [{id, task, agent, n, start, end, open, outcome, startSeq, endSeq}]
 * - waits: [{id, task, agent, start, end, open, person, outcome, startSeq, endSeq, wokenBy}]
 * - links: [{kind: "delegation"|"result", task, from, to, t0, t1, outcome}] between session/wait ids
 */
export function buildSessions(events, { now = null } = {}) {
  const log = new SessionLog();
  log.add(events, 0, events.length);
  return log.model(now);
}

/**
 * The same reading, fed a few events at a time: a view that follows a live run or a replay
 * reads each event once, and asks for the model (cheap: no event is read again) when it draws.
 */
export class SessionLog {
  constructor() {
    this.tasks = new Map();
    this.sessions = [];
    this.waits = [];
    this.byId = new Map();
    this.delegations = []; // {child, parent, seq, ts}
    this.decided = new Map(); // task id -> [seq of each approval decision]
    this.first = null;
    this.last = null;
    this.count = 0; // events read
  }

  task(id) {
    let t = this.tasks.get(id);
    if (!t) {
      t = { id, parent: null, agent: null, title: "", status: "todo", settledAt: null, settledSeq: null, sessions: [], waits: [], children: [] };
      this.tasks.set(id, t);
    }
    return t;
  }

  /** Read events[from .. to); a subtree's cancel as one ending per task (endings.js). */
  add(events, from = 0, to = events.length) {
    const tree = {
      children: (id) => this.tasks.get(id)?.children,
      status: (id) => this.tasks.get(id)?.status,
      agent: (id) => this.tasks.get(id)?.agent,
    };
    for (let i = from; i < to; i++) {
      this.count++;
      for (const one of endings(events[i], tree)) this.one(one);
    }
  }

  one(e) {
    const d = e.data || {};
    if (this.first === null) this.first = e.ts;
    this.last = e.ts;
    switch (e.kind) {
      case KIND.CREATED: {
        const t = this.task(e.task_id);
        t.agent = e.agent;
        t.title = d.title ?? "";
        break;
      }
      case KIND.DELEGATED: {
        const t = this.task(e.task_id);
        t.agent = d.to ?? e.agent;
        t.title = d.title ?? "";
        t.parent = d.parent_id ?? null;
        if (t.parent) this.task(t.parent).children.push(t.id);
        this.delegations.push({ child: t.id, parent: t.parent, seq: e.seq, ts: e.ts });
        break;
      }
      case KIND.STARTED: {
        const t = this.task(e.task_id);
        if (!t.agent) t.agent = e.agent;
        const stale = openSession(t); // a start without an end: the log lost nothing, but be safe
        if (stale) close(stale, e, "interrupted");
        const wait = openWait(t);
        if (wait) close(wait, e, "woken");
        t.status = "in_progress";
        const s = { id: `${t.id}#${t.sessions.length + 1}`, task: t.id, agent: t.agent, n: t.sessions.length + 1, start: e.ts, end: null, open: true, outcome: "running", startSeq: e.seq, endSeq: null };
        t.sessions.push(s);
        this.sessions.push(s);
        this.byId.set(s.id, s);
        break;
      }
      case KIND.WAITING: {
        const t = this.task(e.task_id);
        const s = openSession(t);
        if (s) close(s, e, "handed");
        t.status = "waiting";
        const person = (d.pending_approvals ?? 0) > 0;
        const w = { id: `${t.id}~${t.waits.length + 1}`, task: t.id, agent: t.agent, start: e.ts, end: null, open: true, person, reports: d.open_subtasks ?? 0, outcome: "waiting", startSeq: e.seq, endSeq: null, after: s?.id ?? null, wokenBy: null };
        t.waits.push(w);
        this.waits.push(w);
        this.byId.set(w.id, w);
        break;
      }
      case KIND.WOKEN: {
        const t = this.task(e.task_id);
        const w = openWait(t);
        if (w) close(w, e, "woken");
        t.status = "todo";
        break;
      }
      case KIND.REQUEUED: {
        const t = this.task(e.task_id);
        const s = openSession(t);
        if (s) close(s, e, "interrupted");
        t.status = "todo";
        break;
      }
      case KIND.COMPLETED:
      case KIND.FAILED:
      case KIND.CANCELLED: {
        const t = this.task(e.task_id);
        const outcome = SESSION_END[e.kind];
        const s = openSession(t);
        if (s) close(s, e, outcome);
        const w = openWait(t);
        if (w) close(w, e, outcome);
        t.status = outcome;
        t.settledAt = e.ts;
        t.settledSeq = e.seq;
        break;
      }
      case KIND.APPROVAL_DECIDED:
        if (!this.decided.has(e.task_id)) this.decided.set(e.task_id, []);
        this.decided.get(e.task_id).push(e.seq);
        break;
      default:
        break;
    }
  }

  /** The model as of the events read so far; what is open ends at `now`. */
  model(now = null) {
    const { tasks, sessions, waits } = this;
    const first = this.first ?? 0;
    const last = this.last ?? 0;
    const clockNow = Math.max(now ?? last, last);
    // What is still open runs to now; a finished run ends at its last event, however late.
    let end = last;
    for (const list of [sessions, waits]) {
      for (const x of list) {
        if (x.open) x.end = clockNow;
        if (x.end > end) end = x.end;
      }
    }
    for (const w of waits) w.wokenBy = wakeCause(tasks, w, this.decided.get(w.task) ?? []);

    const links = [];
    for (const { child, parent, seq, ts } of this.delegations) {
      const c = tasks.get(child);
      const p = tasks.get(parent);
      const from = p ? sessionAt(p, seq) : null;
      const to = c.sessions[0] ?? null;
      if (from && to) links.push({ kind: "delegation", task: child, from: from.id, to: to.id, t0: ts, t1: to.start, outcome: "delegated" });
      // The result goes back from the child's last session to the parent's wait it ended.
      if (c.settledSeq !== null && p && c.sessions.length) {
        const wait = p.waits.find((w) => w.startSeq < c.settledSeq && (w.endSeq === null || w.endSeq >= c.settledSeq));
        const back = c.sessions[c.sessions.length - 1];
        if (wait) {
          const next = p.sessions.find((x) => x.startSeq > wait.startSeq);
          const target = wait.wokenBy?.task === child && next ? next : wait;
          links.push({ kind: "result", task: child, from: back.id, to: target.id, t0: c.settledAt, t1: target === next ? next.start : c.settledAt, outcome: c.status });
        }
      }
    }
    return { byId: this.byId, start: first, end, tasks, sessions, waits, links };
  }
}

function openSession(t) {
  const s = t.sessions[t.sessions.length - 1];
  return s && s.open ? s : null;
}

function openWait(t) {
  const w = t.waits[t.waits.length - 1];
  return w && w.open ? w : null;
}

function close(item, e, outcome) {
  item.open = false;
  item.end = e.ts;
  item.endSeq = e.seq;
  item.outcome = outcome;
}

/** The session of task t that held the log position seq (the one that made that event). */
function sessionAt(t, seq) {
  let best = null;
  for (const s of t.sessions) if (s.startSeq < seq && (s.endSeq === null || s.endSeq >= seq)) best = s;
  return best ?? t.sessions.filter((s) => s.startSeq < seq).pop() ?? null;
}

/**
 * What ended a wait: the report whose settling came last before the wake, or a person's
 * decision when that came later. Only what happened since the session before the wait began
 * counts. Returns {task, seq} | {person: true, seq} | null (still waiting, or nothing found).
 */
function wakeCause(tasks, w, decisions) {
  if (w.endSeq === null) return null;
  const t = tasks.get(w.task);
  const before = t.sessions.find((s) => s.id === w.after);
  const since = before ? before.startSeq : -1;
  let best = null;
  for (const cid of t.children) {
    const c = tasks.get(cid);
    const seq = c.settledSeq;
    if (seq !== null && seq > since && seq <= w.endSeq && (!best || seq > best.seq)) best = { task: c.id, seq };
  }
  for (const seq of decisions) {
    if (seq > since && seq <= w.endSeq && (!best || seq > best.seq)) best = { person: true, seq };
  }
  return best;
}
