// The page's model of the company: the org chart, the tasks it knows, what each agent is up to.
// It is fed a snapshot and then events, and tells listeners what changed.

import { withCall } from "./cost.js";
import { endings } from "./endings.js";
import { KIND, LIFECYCLE_TOOLS } from "./kinds.js";
import { OPEN, visible } from "./util.js";

const FINISHED = ["done", "failed", "cancelled"];

/** A task as its creation event (created or delegated) describes it: todo, nothing done. */
function newTask(e, where) {
  const d = e.data || {};
  return {
    id: e.task_id,
    title: d.title ?? "",
    description: d.description ?? "",
    status: "todo",
    priority: d.priority ?? "normal",
    language: d.language ?? "en",
    result: null,
    files: [],
    error: null,
    created_at: e.ts,
    updated_at: e.ts,
    started_at: null,
    finished_at: null,
    ...where,
  };
}

export class Company {
  constructor() {
    this.org = null;
    this.agents = new Map(); // id -> agent from the org chart
    this.tasks = new Map(); // id -> task
    this.children = new Map(); // parent id -> Set of child ids
    this.notes = new Map(); // agent id -> {thought, thought_at, action, action_at}
    this.streams = new Map(); // agent id -> {task, text}: written now, not yet in the log
    this.approvals = new Map(); // approval id -> a call waiting for a person (or decided here)
    this.questions = new Map(); // question id -> an agent's question waiting for a person
    // Tasks the store holds but the snapshot left out (finished ones past the newest few
    // hundred), by status: overall (key null) and per goal. They are finished, so no event
    // changes them, and counts() adds them to what the map holds.
    this.unsent = new Map();
    this.listeners = new Set();
    this.now = () => Date.now() / 1000; // a replay sets its own clock
    // Bumped by every change, so desks() and counts() are worked out once per change however
    // many views ask in a frame (a 1,000-desk floor asked several times per frame).
    this.version = 0;
    this.memo = { version: -1, desks: null, counts: new Map() };
  }

  fresh() {
    if (this.memo.version !== this.version) this.memo = { version: this.version, desks: null, counts: new Map() };
    return this.memo;
  }

  listen(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  emit(change) {
    for (const fn of this.listeners) fn(change);
  }

  agent(id) {
    return this.agents.get(id) ?? { id, name: id, title: "not in this org chart", reports: [] };
  }

  loadSnapshot(snap) {
    if (snap.org) {
      this.org = snap.org;
      this.agents = new Map(snap.org.agents.map((a) => [a.id, a]));
    }
    for (const task of snap.tasks) this.put(task);
    for (const [id, note] of Object.entries(snap.agents || {})) this.notes.set(id, { ...note });
    if (snap.approvals) {
      // The snapshot is newer than anything seen: a call it no longer lists was decided.
      const waiting = new Set(snap.approvals.map((a) => a.id));
      for (const [id, a] of this.approvals) if (a.status === "pending" && !waiting.has(id)) this.approvals.delete(id);
      for (const a of snap.approvals) this.approvals.set(a.id, { ...a });
    }
    if (snap.questions) {
      this.questions = new Map(snap.questions.map((q) => [q.id, { ...q }]));
    }
    if (snap.counts) {
      this.version++;
      this.unsent = new Map();
      const whole = [[null, snap.counts], ...Object.entries(snap.root_counts ?? {})];
      for (const [root, stored] of whole) {
        const held = this.countTasks(root, false);
        // Every open task is sent, so only finished ones can be missing (and counting open
        // ones here would keep a task that started between the two reads working for ever).
        const rest = {};
        for (const s of FINISHED) rest[s] = Math.max(0, (stored[s] ?? 0) - held[s]);
        this.unsent.set(root, rest);
      }
    }
    this.version++;
    this.emit({ type: "snapshot" });
  }

  put(task) {
    this.version++;
    const old = this.tasks.get(task.id);
    const merged = old ? { ...old, ...task } : task;
    this.tasks.set(task.id, merged);
    if (merged.parent_id) {
      if (!this.children.has(merged.parent_id)) this.children.set(merged.parent_id, new Set());
      this.children.get(merged.parent_id).add(merged.id);
    }
    return merged;
  }

  patch(id, fields) {
    const task = this.tasks.get(id);
    if (!task) return null;
    this.version++;
    Object.assign(task, fields);
    return task;
  }

  /** Apply events in order; returns nothing, tells listeners once per batch. A subtree's
   * cancel is applied as one ending per task it ended (endings.js). */
  apply(events) {
    for (const e of events) for (const one of endings(e, this.tree)) this.applyOne(one);
    this.emit({ type: "events", events });
  }

  /** The model's tree, as endings.js reads it. */
  get tree() {
    return {
      children: (id) => this.children.get(id),
      status: (id) => this.tasks.get(id)?.status,
      agent: (id) => this.tasks.get(id)?.assignee,
    };
  }

  applyOne(e) {
    const d = e.data || {};
    switch (e.kind) {
      case KIND.CREATED:
        this.put(newTask(e, {
          root_id: e.task_id,
          parent_id: null,
          assignee: e.agent,
          created_by: d.created_by ?? "user",
        }));
        break;
      case KIND.DELEGATED: {
        const parent = this.tasks.get(d.parent_id);
        this.put(newTask(e, {
          root_id: parent?.root_id ?? d.parent_id,
          parent_id: d.parent_id,
          assignee: d.to,
          created_by: e.agent,
        }));
        break;
      }
      case KIND.STARTED: {
        const task = this.tasks.get(e.task_id);
        this.patch(e.task_id, {
          status: "in_progress",
          started_at: task?.started_at ?? e.ts,
          updated_at: e.ts,
          attempts: d.attempt,
          turn: d.turn,
        });
        break;
      }
      case KIND.WAITING:
        this.patch(e.task_id, { status: "waiting", updated_at: e.ts });
        break;
      case KIND.WOKEN:
      case KIND.REQUEUED:
        this.patch(e.task_id, { status: "todo", updated_at: e.ts });
        break;
      case KIND.COMPLETED:
        this.patch(e.task_id, {
          status: "done",
          result: d.result ?? null,
          files: d.files ?? [],
          finished_at: e.ts,
          updated_at: e.ts,
        });
        break;
      case KIND.FAILED:
        this.patch(e.task_id, { status: "failed", error: d.error ?? null, finished_at: e.ts, updated_at: e.ts });
        break;
      case KIND.CANCELLED:
        this.patch(e.task_id, { status: "cancelled", error: d.reason ?? null, finished_at: e.ts, updated_at: e.ts });
        break;
      case KIND.THOUGHT:
        if (e.agent) {
          this.note(e.agent, { thought: d.text ?? "", thought_at: e.ts, thought_task: e.task_id });
          // The paragraph being streamed has landed in the log: the desk shows it from here.
          if (this.streams.get(e.agent)?.task === e.task_id) this.streams.delete(e.agent);
        }
        break;
      case KIND.MODEL_CALL: {
        const task = this.tasks.get(e.task_id);
        if (task) task.usage = withCall(task.usage, d);
        this.version++;
        break;
      }
      case KIND.TOOL_CALL:
      case KIND.TOOL_DENIED:
        if (d.approval && e.kind === KIND.TOOL_CALL) this.settle(d.approval, "ran");
        // Delegating and finishing show as flights and statuses; a desk's action line is for work.
        if (e.agent && !LIFECYCLE_TOOLS.has(d.tool)) {
          const action = `${d.tool ?? ""} ${visible(d.summary)}`.trim() + (e.kind === KIND.TOOL_DENIED ? " (denied)" : "");
          this.note(e.agent, { action, action_at: e.ts, action_task: e.task_id });
        }
        break;
      case KIND.APPROVAL_REQUESTED:
        this.version++; // a desk now waits for a person
        this.approvals.set(d.id, {
          id: d.id,
          task_id: e.task_id,
          agent: e.agent,
          tool: d.tool,
          summary: d.summary ?? "",
          rule: d.rule ?? "",
          requested_at: e.ts,
          timeout_at: d.timeout_at ?? null,
          status: "pending",
        });
        break;
      case KIND.APPROVAL_DECIDED: {
        const a = this.approvals.get(d.id);
        if (a) Object.assign(a, { status: d.decision, decided_by: d.by, decided_at: e.ts, note: d.note ?? null });
        this.version++;
        this.forgetDecided();
        break;
      }
      case KIND.APPROVAL_CLAIMED:
        this.settle(d.id, "running");
        break;
      case KIND.QUESTION_ASKED:
        this.version++; // a desk now waits for a person's answer
        this.questions.set(d.id, { id: d.id, task_id: e.task_id, agent: e.agent, question: d.question, status: "pending" });
        break;
      case KIND.QUESTION_ANSWERED:
      case KIND.QUESTION_WITHDRAWN:
        this.version++;
        this.questions.delete(d.id);
        break;
      default:
        break;
    }
  }

  /** What agents are writing now (live only): text "" ends a stream. */
  stream(desks) {
    this.version++;
    for (const [agentId, { task, text }] of Object.entries(desks || {})) {
      if (text) this.streams.set(agentId, { task, text });
      else this.streams.delete(agentId);
    }
  }

  /** An approved call is about to run, or ran. */
  settle(id, status) {
    const a = this.approvals.get(id);
    if (a) a.status = status;
    this.version++;
  }

  /** Calls that wait for a person, oldest first. */
  pendingApprovals() {
    return [...this.approvals.values()].filter((a) => a.status === "pending").sort((a, b) => a.requested_at - b.requested_at);
  }

  /** Decided calls are kept a while (the inbox shows who decided), not for ever. */
  forgetDecided(keep = 200) {
    let decided = 0;
    for (const a of this.approvals.values()) if (a.status !== "pending") decided++;
    for (const [id, a] of this.approvals) {
      if (decided <= keep) break;
      if (a.status !== "pending") {
        this.approvals.delete(id);
        decided--;
      }
    }
  }

  note(agentId, fields) {
    this.version++;
    this.notes.set(agentId, { ...(this.notes.get(agentId) || {}), ...fields });
  }

  /** How many calls of this task wait for a person. */
  asksOf(taskId) {
    let n = 0;
    for (const a of this.approvals.values()) if (a.status === "pending" && a.task_id === taskId) n++;
    for (const q of this.questions.values()) if (q.task_id === taskId) n++;
    return n;
  }

  openChildren(id) {
    let n = 0;
    for (const cid of this.children.get(id) ?? []) if (OPEN.has(this.tasks.get(cid)?.status)) n++;
    return n;
  }

  /** Every agent's desk in one pass over the tasks: working beats waiting beats queued. */
  desks() {
    const memo = this.fresh();
    memo.desks ??= this.workOutDesks();
    return memo.desks;
  }

  workOutDesks() {
    const out = new Map();
    for (const id of this.agents.keys()) out.set(id, { state: "idle", task: null, queued: 0, held: 0, latest: null });
    for (const task of this.tasks.values()) {
      const d = out.get(task.assignee);
      if (!d) continue;
      if (!d.latest || task.updated_at > d.latest.updated_at) d.latest = task;
      if (task.status === "in_progress" || task.status === "waiting") d.held++;
      if (task.status === "in_progress") {
        if (d.state !== "working" || task.updated_at > d.task.updated_at) {
          d.state = "working";
          d.task = task;
        }
      } else if (task.status === "waiting" && d.state !== "working") {
        if (d.state !== "waiting" || task.updated_at > d.task.updated_at) {
          d.state = "waiting";
          d.task = task;
        }
      } else if (task.status === "todo") d.queued++;
    }
    // A call waiting for a person: its desk says so (and shows that task) unless it is at work.
    for (const a of this.approvals.values()) {
      const d = a.status === "pending" && out.get(a.agent);
      const task = d && this.tasks.get(a.task_id);
      if (!task) continue;
      d.asks = (d.asks ?? 0) + 1;
      d.askTask ??= task;
      if (d.state !== "working" && task.status === "waiting") {
        d.state = "waiting";
        d.task = task;
      }
    }
    // A question waiting for an answer: the same, counted apart (the badge asks to answer).
    for (const q of this.questions.values()) {
      const d = out.get(q.agent);
      const task = d && this.tasks.get(q.task_id);
      if (!task) continue;
      d.asks = (d.asks ?? 0) + 1;
      d.questions = (d.questions ?? 0) + 1;
      d.askTask ??= task;
      if (d.state !== "working" && task.status === "waiting") {
        d.state = "waiting";
        d.task = task;
      }
    }
    for (const d of out.values()) {
      if (d.state === "waiting") {
        d.open = this.openChildren(d.task.id);
        d.person = d.asks > 0 && this.asksOf(d.task.id) > 0; // waits for a person, not reports
      }
      if (d.state === "idle" && d.queued) d.state = "queued";
      if (!d.task) d.task = d.latest;
    }
    return out;
  }

  roots() {
    return [...this.tasks.values()].filter((t) => !t.parent_id).sort((a, b) => b.created_at - a.created_at);
  }

  counts(rootId = null) {
    const memo = this.fresh();
    if (!memo.counts.has(rootId)) memo.counts.set(rootId, this.countTasks(rootId));
    return { ...memo.counts.get(rootId) };
  }

  countTasks(rootId, withUnsent = true) {
    const counts = { todo: 0, in_progress: 0, waiting: 0, done: 0, failed: 0, cancelled: 0 };
    for (const t of this.tasks.values()) if (!rootId || t.root_id === rootId) counts[t.status]++;
    const rest = withUnsent && this.unsent.get(rootId || null);
    if (rest) for (const s of Object.keys(counts)) counts[s] += rest[s] ?? 0;
    return counts;
  }
}
