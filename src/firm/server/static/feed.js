// The activity feed: the log, as sentences, newest first.

import { AUDIT_KINDS, KIND, LIFECYCLE_TOOLS as QUIET_TOOLS } from "./kinds.js";
import { avatar, clip, clock, el, hue } from "./util.js";

const KEEP = 120;

export class Feed {
  constructor(list, company, { onOpenTask }) {
    this.list = list;
    this.company = company;
    this.onOpenTask = onOpenTask;
  }

  /** Show another company's events (the live one, or a replay's), starting empty. */
  show(company) {
    this.company = company;
    this.items = [];
    this.list.replaceChildren();
  }

  /** Newest first. The rows stay where they are and take new contents, and every row has the
   * same height: a new event never pushes the rows below it down the page (no layout shift). */
  add(events) {
    this.items ??= [];
    const fresh = [];
    for (const e of events) {
      const line = this.describe(e);
      if (line) fresh.push({ e, line });
    }
    if (!fresh.length) return;
    fresh.reverse();
    this.items = fresh.concat(this.items).slice(0, KEEP);
    const rows = this.list.children;
    while (rows.length < this.items.length) this.list.append(el("li"));
    while (rows.length > this.items.length) this.list.lastElementChild.remove();
    this.items.forEach(({ e, line }, i) => {
      if (rows[i].dataset.seq !== String(e.seq)) this.fill(rows[i], e, line);
    });
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
        return { tone: d.ok === false ? "bad" : "tool", text: `${who} · ${d.tool} ${clip(d.summary ?? "", 80)}${d.ok === false ? " (error)" : ""}` };
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
        return { tone: "cancel", text: `${this.title(e.task_id)} was cancelled: ${clip(d.reason ?? "", 100)}` };
      case KIND.REQUEUED:
        return { tone: "wait", text: `${this.title(e.task_id)} goes back in the queue: ${clip(d.reason ?? "", 100)}` };
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
