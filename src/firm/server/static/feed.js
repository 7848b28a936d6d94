// The activity feed: the log, as sentences, newest first.

import { AUDIT_KINDS, LIFECYCLE_TOOLS as QUIET_TOOLS } from "./kinds.js";
import { avatar, clip, clock, el } from "./util.js";

const KEEP = 250;

export class Feed {
  constructor(list, company, { onOpenTask }) {
    this.list = list;
    this.company = company;
    this.onOpenTask = onOpenTask;
  }

  /** Show another company's events (the live one, or a replay's), starting empty. */
  show(company) {
    this.company = company;
    this.list.replaceChildren();
  }

  add(events) {
    const items = [];
    for (const e of events) {
      const line = this.describe(e);
      if (line) items.push(this.item(e, line));
    }
    if (!items.length) return;
    items.reverse();
    this.list.prepend(...items.slice(0, KEEP));
    while (this.list.children.length > KEEP) this.list.lastElementChild.remove();
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
      case "created":
        return { tone: "goal", text: `New goal for ${who}: “${clip(d.title, 90)}”` };
      case "delegated":
        return { tone: "delegate", text: `${who} → ${this.name(d.to)}: “${clip(d.title, 90)}”` };
      case "started": {
        const rerun = d.attempt > (d.turn ?? 0) + 1 ? " (re-run)" : "";
        return d.turn > 0
          ? { tone: "start", text: `${who} merges the results of ${this.title(e.task_id)}${rerun}` }
          : { tone: "start", text: `${who} started ${this.title(e.task_id)}${rerun}` };
      }
      case "thought":
        return { tone: "thought", text: `${who}: “${clip(d.text, 160)}”` };
      case "tool_call":
        if (QUIET_TOOLS.has(d.tool)) return null;
        return { tone: d.ok === false ? "bad" : "tool", text: `${who} · ${d.tool} ${clip(d.summary ?? "", 80)}${d.ok === false ? " (error)" : ""}` };
      case "tool_denied":
        return { tone: "bad", text: `${who} was denied ${d.tool}: ${clip(d.reason ?? "", 120)}` };
      case "tool_error":
        return { tone: "bad", text: `${who} · ${d.tool}: ${clip(d.error ?? "", 120)}` };
      case "waiting":
        return d.open_subtasks
          ? { tone: "wait", text: `${who} waits on ${d.open_subtasks} report${d.open_subtasks === 1 ? "" : "s"}` }
          : null;
      case "woken":
        return { tone: "wait", text: `${who}'s reports on ${this.title(e.task_id)} have all finished` };
      case "completed":
        return { tone: "done", text: `${who} finished ${this.title(e.task_id)}` };
      case "failed":
        return { tone: "bad", text: `${who} failed ${this.title(e.task_id)}: ${clip(d.error ?? "", 140)}` };
      case "cancelled":
        return { tone: "cancel", text: `${this.title(e.task_id)} was cancelled: ${clip(d.reason ?? "", 100)}` };
      case "requeued":
        return { tone: "wait", text: `${this.title(e.task_id)} goes back in the queue: ${clip(d.reason ?? "", 100)}` };
      default:
        return { tone: "other", text: `${e.kind}${who ? ` · ${who}` : ""}${e.task_id ? ` · ${e.task_id}` : ""}` };
    }
  }

  item(e, { tone, text }) {
    const agent = e.agent ? this.company.agent(e.agent) : null;
    const body = e.task_id
      ? el("button", { type: "button", class: "feed-text", onclick: () => this.onOpenTask(e.task_id) }, text)
      : el("span", { class: "feed-text" }, text);
    return el(
      "li",
      { class: `feed-item t-${tone}`, dataset: { seq: e.seq, kind: e.kind } },
      agent ? avatar(agent, "xs") : el("span", { class: "avatar xs ghost", "aria-hidden": "true" }),
      body,
      el("time", { datetime: new Date(e.ts * 1000).toISOString() }, clock(e.ts)),
    );
  }
}
