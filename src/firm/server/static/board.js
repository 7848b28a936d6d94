// The board: a column per status, a card per task, moving as the work moves.

import { avatar, clip, el, elapsed, STATUS_ICON, STATUS_LABEL } from "./util.js";

const COLUMNS = ["todo", "in_progress", "waiting", "done", "failed", "cancelled"];
const PER_COLUMN = 150;

export class Board {
  constructor(root, company, { onOpenTask }) {
    this.root = root;
    this.company = company;
    this.onOpenTask = onOpenTask;
    this.run = ""; // "" = every goal
    this.cards = new Map(); // task id -> {node, key}
    this.columns = new Map();
    this.build();
  }

  build() {
    this.picker = el("select", { id: "board-run", onchange: () => this.choose(this.picker.value) });
    const head = el(
      "div",
      { class: "board-head" },
      el("h2", {}, "Board"),
      el("label", { class: "field" }, el("span", {}, "Goal"), this.picker),
    );
    const grid = el("div", { class: "columns" });
    for (const status of COLUMNS) {
      const list = el("ol", { class: "cards", "aria-labelledby": `col-${status}` });
      const count = el("span", { class: "count" }, "0");
      const more = el("p", { class: "more", hidden: true });
      const column = el(
        "section",
        { class: "column", dataset: { status } },
        el(
          "h3",
          { id: `col-${status}` },
          el("span", { class: `col-dot s-${status}`, "aria-hidden": "true" }, STATUS_ICON[status]),
          STATUS_LABEL[status],
          count,
        ),
        list,
        more,
      );
      this.columns.set(status, { list, count, more });
      grid.append(column);
    }
    this.root.replaceChildren(head, grid);
  }

  /** Show another company (the live one, or a replay's). */
  show(company) {
    this.company = company;
    this.cards.clear();
    this.pickerKey = null;
    for (const { list } of this.columns.values()) list.replaceChildren();
    this.render();
  }

  choose(run) {
    this.run = run;
    this.render();
  }

  renderPicker() {
    const roots = this.company.roots();
    const key = roots.map((r) => `${r.id}:${r.status}`).join(",");
    if (key === this.pickerKey) return;
    this.pickerKey = key;
    const options = [el("option", { value: "" }, `All goals (${roots.length})`)];
    for (const r of roots.slice(0, 200)) {
      options.push(el("option", { value: r.id }, `${STATUS_ICON[r.status]} ${clip(r.title, 60)} · ${r.id}`));
    }
    this.picker.replaceChildren(...options);
    this.picker.value = roots.some((r) => r.id === this.run) ? this.run : "";
    this.run = this.picker.value;
  }

  render() {
    this.renderPicker();
    const now = this.company.now();
    const byStatus = new Map(COLUMNS.map((s) => [s, []]));
    for (const task of this.company.tasks.values()) {
      if (this.run && task.root_id !== this.run) continue;
      byStatus.get(task.status)?.push(task);
    }
    const seen = new Set();
    for (const [status, tasks] of byStatus) {
      const { list, count, more } = this.columns.get(status);
      tasks.sort((a, b) => b.updated_at - a.updated_at || (a.id < b.id ? -1 : 1));
      count.textContent = String(tasks.length);
      const shown = tasks.slice(0, PER_COLUMN);
      more.hidden = tasks.length <= PER_COLUMN;
      more.textContent = `and ${tasks.length - PER_COLUMN} more`;
      const nodes = shown.map((t) => {
        seen.add(t.id);
        return this.card(t, now);
      });
      // Move only what moved, so focus and scroll survive an update.
      nodes.forEach((node, i) => {
        if (list.children[i] !== node) list.insertBefore(node, list.children[i] ?? null);
      });
      while (list.children.length > nodes.length) list.lastElementChild.remove();
    }
    for (const id of this.cards.keys()) if (!seen.has(id)) this.cards.delete(id);
  }

  card(task, now) {
    const agent = this.company.agent(task.assignee);
    const time = elapsed(task, now);
    const key = `${task.status}|${task.title}|${time}|${agent.name}`;
    let entry = this.cards.get(task.id);
    if (!entry) {
      const button = el("button", {
        type: "button",
        dataset: { task: task.id },
        onclick: () => this.onOpenTask(task.id),
      });
      entry = { node: el("li", { dataset: { task: task.id } }, button), button, key: null };
      this.cards.set(task.id, entry);
    }
    if (entry.key !== key) {
      // Update the button in place, so a card keeps keyboard focus while it changes.
      entry.key = key;
      entry.button.className = `card s-${task.status}`;
      entry.button.replaceChildren(
        el(
          "span",
          { class: "card-top" },
          el("span", { class: "card-id" }, task.id),
          time ? el("span", { class: "card-time" }, time) : null,
        ),
        el("span", { class: "card-title" }, clip(task.title, 120)),
        el("span", { class: "card-meta" }, avatar(agent, "sm"), el("span", { class: "card-who" }, agent.name)),
      );
    }
    return entry.node;
  }
}
