// The activity feed: the log, as sentences, grouped by goal (the newest goal first, each
// collapsible, its events newest first); the audit trail's checkpoints only on request.

import { AUDIT_KINDS, KIND, LIFECYCLE_TOOLS as QUIET_TOOLS } from "./kinds.js";
import { describeApproval } from "./asks.js";
import { endsMany } from "./endings.js";
import { avatar, clip, clock, el, hue, STATUS_ICON, visible } from "./util.js";

const KEEP = 150;
const AUDIT = "audit"; // the group of checkpoints (no goal's id looks like this)

export class Feed {
  constructor(list, company, { onOpenTask }) {
    this.list = list;
    this.company = company;
    this.onOpenTask = onOpenTask;
    this.items = [];
    this.collapsed = new Set(); // goals whose lines are folded under their heading
    this.showAudit = false;
    const audit = el("input", { type: "checkbox", id: "feed-audit" });
    audit.addEventListener("change", () => {
      this.showAudit = audit.checked;
      this.layout();
    });
    list.before(
      el(
        "label",
        { class: "feed-audit", title: "The audit trail signs the log's head now and then; `firm audit verify` checks it" },
        audit,
        "Audit checkpoints",
      ),
    );
  }

  /** Show another company's events (the live one, or a replay's), starting empty. */
  show(company) {
    this.company = company;
    this.items = [];
    this.list.replaceChildren();
  }

  /** Every row has the same height and stays where it is, taking new contents (a heading or a
   * line): a new event never pushes the rows below it down the page (no layout shift). */
  add(events) {
    // Newest first, and only as many as are kept: a replay frame at 60× carries thousands.
    const fresh = [];
    for (let i = events.length - 1; i >= 0 && fresh.length < KEEP; i--) {
      const e = events[i];
      const audit = AUDIT_KINDS.has(e.kind);
      const line = audit ? auditLine(e) : this.describe(e);
      if (!line) continue;
      const run = audit ? AUDIT : (this.company.tasks.get(e.task_id)?.root_id ?? "");
      fresh.push({ e, line, run });
    }
    if (!fresh.length) return;
    this.items = fresh.concat(this.items).slice(0, KEEP);
    this.layout();
  }

  /** When a goal was given: its heading's place (newest first; checkpoints last). */
  rank(run, items) {
    if (run === AUDIT) return -Infinity;
    return this.company.tasks.get(run)?.created_at ?? items[items.length - 1].e.ts;
  }

  layout() {
    const groups = new Map();
    for (const item of this.items) {
      if (item.run === AUDIT && !this.showAudit) continue;
      if (!groups.has(item.run)) groups.set(item.run, []);
      groups.get(item.run).push(item);
    }
    const order = [...groups.keys()].sort((a, b) => this.rank(b, groups.get(b)) - this.rank(a, groups.get(a)));
    const rows = [];
    for (const run of order) {
      const items = groups.get(run);
      rows.push({ run, items });
      if (!this.collapsed.has(run)) for (const item of items) rows.push({ item });
    }
    const nodes = this.list.children;
    while (nodes.length < rows.length) this.list.append(el("li"));
    while (nodes.length > rows.length) this.list.lastElementChild.remove();
    rows.forEach((row, i) => {
      const node = nodes[i];
      if (row.item) {
        const key = `e${row.item.e.seq}`;
        if (node.dataset.key !== key) this.fill(node, row.item.e, row.item.line);
        node.dataset.key = key;
      } else {
        const root = this.company.tasks.get(row.run);
        const key = `h${row.run}|${row.items.length}|${this.collapsed.has(row.run)}|${root?.status}|${root?.title}`;
        if (node.dataset.key !== key) this.head(node, row.run, row.items, root);
        node.dataset.key = key;
      }
    });
  }

  head(row, run, items, root) {
    const open = !this.collapsed.has(run);
    const title =
      run === AUDIT ? "Audit trail" : root ? `“${clip(root.title, 70)}”` : run ? run : "Other activity";
    const icon = run === AUDIT ? "⛓" : root ? STATUS_ICON[root.status] ?? "" : "";
    row.className = `feed-head${run === AUDIT ? " audit" : ""}`;
    delete row.dataset.seq;
    delete row.dataset.kind;
    row.dataset.run = run ?? "";
    row.style.setProperty("--run-hue", run && run !== AUDIT ? String(hue(run)) : "0");
    const toggle = () => {
      if (this.collapsed.has(run)) this.collapsed.delete(run);
      else this.collapsed.add(run);
      this.layout();
    };
    row.replaceChildren(
      el(
        "button",
        { type: "button", class: "feed-toggle", "aria-expanded": String(open), title: root?.title ?? title, onclick: toggle },
        el("span", { class: "feed-chevron", "aria-hidden": "true" }, open ? "▾" : "▸"),
        icon ? el("span", { class: "feed-status", "aria-hidden": "true" }, icon) : null,
        el("span", { class: "feed-goal" }, title),
        el("span", { class: "feed-count" }, `${items.length} ${items.length === 1 ? "line" : "lines"}`),
      ),
      root
        ? el("button", { type: "button", class: "feed-open", title: "Open the goal", "aria-label": `Open the goal ${root.title}`, onclick: () => this.onOpenTask(root.id) }, "Open")
        : null,
    );
  }

  name(id) {
    return this.company.agent(id).name;
  }

  title(id) {
    const t = this.company.tasks.get(id);
    return t ? `“${clip(t.title, 80)}”` : id;
  }

  describe(e) {
    const d = e.data || {};
    if (AUDIT_KINDS.has(e.kind)) return null; // `firm audit verify` reads them, people need not
    const who = e.agent ? this.name(e.agent) : "";
    switch (e.kind) {
      case KIND.CREATED:
        return { tone: "goal", text: `New goal for ${who}: “${clip(d.title, 90)}”` };
      case KIND.DELEGATED:
        return { tone: "delegate", text: `${who} → ${this.name(d.to)}: “${clip(d.title, 90)}”` };
      case KIND.STARTED: {
        const rerun = d.attempt > (d.turn ?? 0) + 1 ? " (re-run)" : "";
        return d.turn > 0
          ? { tone: "start", text: `${who} merges the results of ${this.title(e.task_id)}${rerun}` }
          : { tone: "start", text: `${who} started ${this.title(e.task_id)}${rerun}` };
      }
      case KIND.THOUGHT:
        return { tone: "thought", text: `${who}: “${clip(d.text, 160)}”` };
      case KIND.TOOL_CALL:
        if (QUIET_TOOLS.has(d.tool)) return null;
        return { tone: d.ok === false ? "bad" : "tool", text: `${who} · ${d.tool} ${clip(visible(d.summary), 80)}${d.ok === false ? " (error)" : ""}` };
      case KIND.TOOL_DENIED:
        return { tone: "bad", text: `${who} was denied ${d.tool}: ${clip(d.reason ?? "", 120)}` };
      case KIND.TOOL_ERROR:
        return { tone: "bad", text: `${who} · ${d.tool}: ${clip(d.error ?? "", 120)}` };
      case KIND.WAITING:
        return d.open_subtasks
          ? { tone: "wait", text: `${who} waits on ${d.open_subtasks} report${d.open_subtasks === 1 ? "" : "s"}` }
          : null;
      case KIND.WOKEN:
        return { tone: "wait", text: `${who}'s reports on ${this.title(e.task_id)} have all finished` };
      case KIND.COMPLETED:
        return { tone: "done", text: `${who} finished ${this.title(e.task_id)}` };
      case KIND.FAILED:
        return { tone: "bad", text: `${who} failed ${this.title(e.task_id)}: ${clip(d.error ?? "", 140)}` };
      case KIND.CANCELLED:
        if (endsMany(e)) {
          // One line for the whole subtree, as the log has one entry for it.
          const n = d.ended ?? 0;
          return { tone: "cancel", text: `cancelled ${n} task${n === 1 ? "" : "s"} under ${this.title(e.task_id)}: ${clip(d.reason ?? "", 100)}` };
        }
        return { tone: "cancel", text: `${this.title(e.task_id)} was cancelled: ${clip(d.reason ?? "", 100)}` };
      case KIND.REQUEUED:
        return { tone: "wait", text: `${this.title(e.task_id)} goes back in the queue: ${clip(d.reason ?? "", 100)}` };
      case KIND.APPROVAL_REQUESTED:
      case KIND.APPROVAL_DECIDED:
        return describeApproval(e, who);
      default:
        return { tone: "other", text: `${e.kind}${who ? ` · ${who}` : ""}${e.task_id ? ` · ${e.task_id}` : ""}` };
    }
  }

  fill(row, e, { tone, text }) {
    const agent = e.agent ? this.company.agent(e.agent) : null;
    const body = e.task_id
      ? el("button", { type: "button", class: "feed-text", title: text, onclick: () => this.onOpenTask(e.task_id) }, text)
      : el("span", { class: "feed-text", title: text }, text);
    // The goal an event belongs to, as a coloured edge: one run's events read as one strand.
    const root = this.company.tasks.get(e.task_id)?.root_id;
    row.className = `feed-item t-${tone}`;
    row.removeAttribute("style");
    row.dataset.seq = String(e.seq);
    row.dataset.kind = e.kind;
    row.dataset.run = root ?? "";
    row.style.setProperty("--run-hue", root ? String(hue(root)) : "0");
    row.replaceChildren(
      agent ? avatar(agent, "xs") : el("span", { class: "avatar xs ghost", "aria-hidden": "true" }),
      body,
      el("time", { datetime: new Date(e.ts * 1000).toISOString() }, clock(e.ts)),
    );
  }
}

function auditLine(e) {
  const d = e.data || {};
  const hash = d.hash ? ` · ${String(d.hash).slice(0, 12)}…` : "";
  const why = d.reason ? ` (${clip(String(d.reason), 40)})` : "";
  return { tone: "audit", text: `Checkpoint${why}: the log up to #${d.seq ?? e.seq} signed${hash}` };
}
