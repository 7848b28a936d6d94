// The goal's moment: when a goal ends, a banner says how (done, done with parts not
// delivered, failed, cancelled), shows the first lines of its result, and opens the report.
// It floats over the page, so it never pushes the floor about.

import { ENDINGS } from "./kinds.js";
import { el, OPEN } from "./util.js";

const HEADLINE = {
  done: "Done",
  partial: "Done, with parts not delivered",
  failed: "Failed",
  cancelled: "Cancelled",
};
const ICON = { done: "✓", partial: "◐", failed: "✕", cancelled: "⊘" };

/** How a goal ended, from its tree: a done goal with failed or cancelled parts is partial. */
export function outcome(company, root) {
  if (root.status === "failed" || root.status === "cancelled") return root.status;
  const counts = company.counts(root.id);
  return counts.failed || counts.cancelled ? "partial" : "done";
}

export class GoalBanner {
  constructor(node, { onOpenTask }) {
    this.node = node;
    this.onOpenTask = onOpenTask;
  }

  /** Show a banner for the last goal among these events that ended. */
  consider(company, events) {
    let ended = null;
    for (const e of events) {
      if (!ENDINGS.has(e.kind)) continue;
      const task = company.tasks.get(e.task_id);
      if (task && !task.parent_id) ended = task;
    }
    if (ended) this.show(company, ended);
  }

  show(company, root) {
    const how = outcome(company, root);
    const counts = company.counts(root.id);
    const total = Object.values(counts).reduce((a, b) => a + b, 0);
    const missing = (counts.failed ?? 0) + (counts.cancelled ?? 0);
    const detail =
      how === "partial"
        ? `${counts.done} of ${total} tasks delivered; ${missing} not (${counts.failed} failed, ${counts.cancelled} cancelled).`
        : `${counts.done} of ${total} tasks done.`;
    const text = (root.status === "done" ? root.result : root.error) ?? "";
    const lines = text.split("\n").filter((l) => l.trim()).slice(0, 3);
    this.node.replaceChildren(
      el("span", { class: "banner-icon", "aria-hidden": "true" }, ICON[how]),
      el(
        "div",
        { class: "banner-body" },
        el("p", { class: "banner-head" }, el("strong", {}, HEADLINE[how]), ` · “${root.title}”`),
        el("p", { class: "banner-detail" }, detail),
        lines.length ? el("div", { class: "banner-result" }, lines.map((l) => el("p", {}, l))) : null,
      ),
      el(
        "div",
        { class: "banner-actions" },
        el("button", { type: "button", class: "primary", onclick: () => this.onOpenTask(root.id) }, "Open the report"),
        el("button", { type: "button", class: "icon", "aria-label": "Dismiss", onclick: () => this.hide() }, "✕"),
      ),
    );
    this.node.dataset.outcome = how;
    this.node.dataset.run = root.id;
    this.node.setAttribute("role", how === "failed" ? "alert" : "status");
    this.node.hidden = false;
  }

  hide() {
    this.node.hidden = true;
  }
}

/** Progress of the goals still running: "“Launch…” 18/25". */
export function progressChips(company) {
  const chips = [];
  for (const root of company.roots()) {
    if (!OPEN.has(root.status)) continue;
    const counts = company.counts(root.id);
    const total = Object.values(counts).reduce((a, b) => a + b, 0);
    const finished = counts.done + counts.failed + counts.cancelled;
    chips.push({ root, finished, total });
  }
  return chips;
}
