// The approvals inbox: a button in the top bar with the number of calls waiting for a person,
// opening the list of them, each with its arguments and Approve / Deny.
//
// The number follows the live company (the snapshot, then approval events): no polling. The
// arguments are read from the API when the inbox opens and when a new call arrives while it is
// open, once per burst.

import { DecisionCard, approvalsApi, merged } from "./decide.js";
import { avatar, clip, debounce, el } from "./util.js";

export class Inbox {
  constructor(company, { onOpenTask, needToken, toast, announce }) {
    this.company = company;
    this.onOpenTask = onOpenTask;
    this.options = { needToken, toast, announce };
    this.announce = announce;
    this.cards = new Map(); // approval id -> {item, card}
    this.full = new Map(); // approval id -> the API's view, with its arguments
    this.shown = new Set(); // what this opening of the inbox has shown (decided ones stay)
    this.known = null; // pending ids at the last render, to tell people of new ones
    this.fetchSoon = debounce(() => this.fetch(), 250);
    this.build();
  }

  build() {
    this.count = el("b", { class: "inbox-count" }, "0");
    this.button = el(
      "button",
      {
        type: "button",
        id: "inbox-open",
        class: "inbox-open",
        "aria-haspopup": "dialog",
        "aria-controls": "inbox",
        dataset: { count: "0" },
        onclick: () => this.open(),
      },
      el("span", { class: "ask-icon inbox-icon", "aria-hidden": "true" }, "!"),
      el("span", { class: "inbox-word" }, "Approvals"),
      this.count,
    );
    document.querySelector(".topbar").append(this.button);

    this.list = el("ol", { class: "inbox-list", id: "inbox-list" });
    this.empty = el("p", { class: "inbox-empty muted" }, "Nothing waits for a person.");
    this.status = el("p", { class: "error", role: "alert", hidden: true });
    this.title = el("h2", { id: "inbox-title", tabindex: "-1" }, "Waiting for a person");
    this.dialog = el(
      "dialog",
      { id: "inbox", class: "drawer inbox", "aria-labelledby": "inbox-title" },
      el(
        "div",
        { class: "drawer-panel" },
        el(
          "header",
          { class: "drawer-head" },
          el("div", {}, el("p", { class: "eyebrow" }, "Approvals"), this.title),
          el("button", { type: "button", class: "icon", "aria-label": "Close the approvals", onclick: () => this.dialog.close() }, "✕"),
        ),
        el("div", { class: "drawer-body" }, this.status, this.empty, this.list),
      ),
    );
    this.dialog.addEventListener("click", (event) => {
      if (event.target === this.dialog) this.dialog.close();
    });
    this.dialog.addEventListener("close", () => {
      this.shown.clear();
      this.opener?.focus?.();
    });
    document.body.append(this.dialog);
  }

  /** Approval events (or a snapshot) arrived: the count, and the list if it is open. */
  onEvents(events = null) {
    const pending = this.company.pendingApprovals();
    const n = pending.length;
    this.count.textContent = String(n);
    this.button.dataset.count = String(n);
    this.button.setAttribute("aria-label", n ? `Approvals: ${n} waiting for a person` : "Approvals: none waiting");
    this.button.title = n ? `${n} call${n === 1 ? "" : "s"} waiting for a person` : "Nothing waits for a person";
    if (this.known && events) {
      const fresh = pending.filter((a) => !this.known.has(a.id));
      if (fresh.length === 1) {
        const a = fresh[0];
        this.announce(`${this.company.agent(a.agent).name} waits for a person to approve ${a.tool}.`);
      } else if (fresh.length > 1) {
        this.announce(`${fresh.length} more calls wait for a person.`);
      }
    }
    this.known = new Set(pending.map((a) => a.id));
    if (this.dialog.open) {
      this.renderList();
      if (pending.some((a) => !this.full.has(a.id))) this.fetchSoon();
    }
  }

  open() {
    this.opener = document.activeElement;
    if (!this.dialog.open) this.dialog.showModal();
    this.renderList();
    this.title.focus();
    this.fetch();
  }

  async fetch() {
    try {
      const items = await approvalsApi.list();
      for (const a of items) this.full.set(a.id, a);
      this.status.hidden = true;
    } catch (error) {
      if (error.status === 401) this.options.needToken(error.message, () => this.fetch());
      this.status.textContent = error.message;
      this.status.hidden = false;
    }
    if (this.dialog.open) this.renderList();
  }

  renderList() {
    for (const a of this.company.pendingApprovals()) this.shown.add(a.id);
    const rows = [];
    for (const id of this.shown) {
      const a = merged(this.full.get(id), this.company.approvals.get(id));
      if (a) rows.push(a);
    }
    rows.sort((x, y) => x.requested_at - y.requested_at);
    this.empty.hidden = rows.length > 0;
    const items = rows.map((a) => this.item(a));
    // Keep the items in place (a card being typed in keeps its focus); add and order the rest.
    items.forEach((item, i) => {
      if (this.list.children[i] !== item) this.list.insertBefore(item, this.list.children[i] ?? null);
    });
    while (this.list.children.length > items.length) this.list.lastElementChild.remove();
    for (const id of this.cards.keys()) if (!this.shown.has(id)) this.cards.delete(id);
  }

  item(a) {
    let entry = this.cards.get(a.id);
    if (!entry) {
      const agent = this.company.agent(a.agent);
      const task = this.company.tasks.get(a.task_id);
      const card = new DecisionCard(a, {
        ...this.options,
        nameOf: (id) => this.company.agent(id).name,
        onDecided: () => this.onEvents(),
      });
      const item = el(
        "li",
        { class: "inbox-item", dataset: { approval: a.id } },
        el(
          "div",
          { class: "inbox-who" },
          avatar(agent, "sm"),
          el("span", {}, el("strong", {}, agent.name), ` · ${agent.title}`),
        ),
        el(
          "p",
          { class: "inbox-task" },
          "Task ",
          el(
            "button",
            {
              type: "button",
              class: "link",
              onclick: () => {
                this.dialog.close();
                this.onOpenTask(a.task_id);
              },
            },
            clip(task?.title ?? a.task_id, 120),
          ),
          ` · ${a.task_id}`,
        ),
        card.node,
      );
      entry = { item, card };
      this.cards.set(a.id, entry);
    } else {
      entry.card.update(a);
    }
    return entry.item;
  }
}
