// In a task's drawer: its calls that wait for a person (Approve / Deny, the arguments in full)
// and those a person decided (who, when, the note).
//
// The drawer redraws itself when events touch its task; this section is one node per task
// that the drawer keeps in place across redraws, so a note being typed survives them. It reads
// the task's calls from the API when the drawer opens and when the company's view of them
// changes (an approval event), not on every redraw.

import { DecisionCard, approvalsApi, merged } from "./decide.js";
import { el } from "./util.js";

export class TaskApprovals {
  constructor(company, { needToken, toast, announce, onDecided }) {
    this.company = company;
    this.options = { needToken, toast, announce, onDecided };
    this.taskId = null;
    this.node = null;
    this.cards = new Map();
    this.fetched = new Map(); // approval id -> the API's view
    this.key = null;
  }

  /** The section for this task (the same node while the drawer shows the same task). */
  section(task) {
    if (task.id !== this.taskId || !this.node) {
      this.taskId = task.id;
      this.cards.clear();
      this.fetched.clear();
      this.waiting = el("div", { class: "decisions" });
      this.decided = el("div", { class: "decisions" });
      this.waitingHead = el("h3", {}, "Waiting for your decision");
      this.decidedHead = el("h3", {}, "Decided by a person");
      this.node = el(
        "section",
        { class: "drawer-section asks", hidden: true, "aria-label": "Calls that need a person" },
        el("div", { class: "asks-waiting" }, this.waitingHead, this.waiting),
        el("div", { class: "asks-decided" }, this.decidedHead, this.decided),
      );
      this.key = null;
    }
    const key = this.companyKey();
    if (key !== this.key) {
      this.key = key;
      this.fetch(task.id);
    }
    this.render();
    return this.node;
  }

  /** What the live company knows of this task's calls; a change means reading them again. */
  companyKey() {
    const parts = [];
    for (const a of this.company.approvals.values()) if (a.task_id === this.taskId) parts.push(`${a.id}:${a.status}`);
    return parts.join(",");
  }

  async fetch(taskId) {
    try {
      const items = await approvalsApi.list({ task: taskId, status: "all" });
      if (taskId !== this.taskId) return;
      for (const a of items) this.fetched.set(a.id, a);
    } catch {
      return; // the drawer shows the task; its calls come with the next event
    }
    this.render();
  }

  render() {
    const rows = new Map();
    for (const [id, a] of this.fetched) rows.set(id, a);
    for (const a of this.company.approvals.values()) {
      if (a.task_id === this.taskId) rows.set(a.id, merged(rows.get(a.id), a));
    }
    const all = [...rows.values()].sort((x, y) => x.requested_at - y.requested_at);
    const waiting = all.filter((a) => a.status === "pending");
    const decided = all.filter((a) => a.status !== "pending");
    this.node.hidden = all.length === 0;
    this.place(this.waiting, waiting);
    this.place(this.decided, decided);
    this.waitingHead.parentNode.hidden = waiting.length === 0;
    this.decidedHead.parentNode.hidden = decided.length === 0;
    this.decidedHead.textContent = decided.length === 1 ? "Decided" : `Decided (${decided.length})`;
  }

  place(box, approvals) {
    const nodes = approvals.map((a) => {
      let card = this.cards.get(a.id);
      if (card) card.update(a);
      else {
        card = new DecisionCard(a, {
          ...this.options,
          nameOf: (id) => this.company.agent(id).name,
          onDecided: (d) => this.decidedHere(d),
        });
        this.cards.set(a.id, card);
      }
      return card.node;
    });
    nodes.forEach((node, i) => {
      if (box.children[i] === node) return;
      const focused = node.contains(document.activeElement) ? document.activeElement : null;
      box.insertBefore(node, box.children[i] ?? null);
      focused?.focus(); // a card moving from waiting to decided keeps the focus on its verdict
    });
    while (box.children.length > nodes.length) box.lastElementChild.remove();
  }

  decidedHere(decided) {
    this.fetched.set(decided.id, decided);
    this.options.onDecided?.(decided);
    // The card stays where it is until the next redraw, so focus stays on its verdict.
  }
}
