// The drawer: one task in full — its subtasks, results, files, failure reason — and Cancel.
// The file viewer opens on top of it.

import { api } from "./api.js";
import { usageLines } from "./cost.js";
import { avatar, clip, clock, debounce, el, elapsed, markdown, OPEN, STATUS_ICON, statusPill, visible } from "./util.js";

export class Drawer {
  constructor(company, { toast, needToken }) {
    this.company = company;
    this.toast = toast;
    this.needToken = needToken;
    this.dialog = document.getElementById("drawer");
    this.title = document.getElementById("drawer-title");
    this.eyebrow = document.getElementById("drawer-id");
    this.body = document.getElementById("drawer-body");
    this.viewer = new FileViewer();
    this.taskId = null;
    this.tree = new Set();
    this.history = [];
    this.dialog.querySelector("[data-close]").addEventListener("click", () => this.close());
    this.dialog.addEventListener("close", () => {
      this.taskId = null;
      this.history = [];
      this.opener?.focus?.();
    });
    // A click on the backdrop (outside the panel) closes the drawer.
    this.dialog.addEventListener("click", (event) => {
      if (event.target === this.dialog) this.close();
    });
    this.refresh = debounce(() => this.load(false), 250);
    this.replay = null; // while set, tasks come from the replay, as of its position
    this.sections = []; // more of a task, from other modules: {section(task) -> a kept node}
  }

  /** Add a section to every live task's drawer, below its actions. Its node is kept in place
   * across redraws (what is typed in it, and its focus, survive the task's events). */
  use(section) {
    this.sections.push(section);
  }

  /** Read tasks from a replay (or, with null, from the API again). */
  showReplay(replay) {
    this.replay = replay;
    if (this.taskId) this.load(false);
  }

  open(taskId, { push = false } = {}) {
    if (!this.dialog.open) {
      this.opener = document.activeElement;
      this.history = [];
      this.dialog.showModal();
    } else if (push && this.taskId && this.taskId !== taskId) {
      this.history.push(this.taskId);
    }
    this.taskId = taskId;
    this.body.replaceChildren(el("p", { class: "muted" }, "Loading…"));
    this.title.textContent = this.company.tasks.get(taskId)?.title ?? taskId;
    this.eyebrow.textContent = taskId;
    this.load(true);
  }

  close() {
    if (this.dialog.open) this.dialog.close();
  }

  /** Events touching the open tree bring it up to date (a little later, once per burst). */
  onEvents(events) {
    if (!this.taskId) return;
    if (events.some((e) => this.tree.has(e.task_id) || this.tree.has(e.data?.parent_id))) this.refresh();
  }

  async load(focus) {
    const id = this.taskId;
    if (!id) return;
    let detail;
    let activity;
    if (this.replay) {
      const found = this.replay.detail(id);
      if (!found) {
        this.body.replaceChildren(el("p", { class: "muted" }, "This task does not exist yet at this point of the replay."));
        return;
      }
      this.tree = new Set([id, ...found.detail.subtree.map((t) => t.id)]);
      const scroll = this.body.scrollTop;
      this.render(found.detail, found.events);
      this.body.scrollTop = focus ? 0 : scroll;
      if (focus) this.title.focus();
      return;
    }
    try {
      [detail, activity] = await Promise.all([api.task(id), api.events(id, 0, 200).catch(() => null)]);
    } catch (error) {
      if (id !== this.taskId) return;
      if (error.status === 401) this.needToken(error.message);
      this.body.replaceChildren(el("p", { class: "error", role: "alert" }, error.message));
      return;
    }
    if (id !== this.taskId) return;
    this.tree = new Set([detail.id, ...detail.subtree.map((t) => t.id)]);
    const scroll = this.body.scrollTop;
    this.render(detail, activity?.events ?? []);
    this.body.scrollTop = focus ? 0 : scroll;
    if (focus) this.title.focus();
  }

  render(task, events) {
    const company = this.company;
    this.title.textContent = task.title;
    this.eyebrow.textContent = task.id;
    const agent = company.agent(task.assignee);
    const from = task.created_by === "user" ? "you" : company.agent(task.created_by).name;
    const parts = [];

    const actions = el("div", { class: "drawer-actions" });
    if (this.history.length) {
      actions.append(el("button", { type: "button", class: "ghost", onclick: () => this.back() }, "← Back"));
    }
    if (task.parent_id) {
      actions.append(
        el("button", { type: "button", class: "ghost", onclick: () => this.open(task.parent_id, { push: true }) }, "Up to the parent task"),
      );
    }
    if (OPEN.has(task.status) && !this.replay) {
      const open = 1 + task.subtree.filter((t) => OPEN.has(t.status)).length;
      actions.append(
        el(
          "button",
          { type: "button", class: "danger", "data-action": "cancel", onclick: (e) => this.cancel(task, e.currentTarget) },
          open > 1 ? `Cancel task and ${open - 1} open below it` : "Cancel task",
        ),
      );
    }

    parts.push(
      el(
        "div",
        { class: "drawer-summary" },
        statusPill(task.status),
        el("span", { class: "who-line" }, avatar(agent, "sm"), el("strong", {}, agent.name), ` · ${agent.title}`),
      ),
      el(
        "dl",
        { class: "facts" },
        fact("From", from),
        fact("Priority", task.priority),
        fact("Language", task.language),
        fact("Created", clock(task.created_at)),
        task.started_at ? fact("Time", elapsed(task, company.now())) : null,
        task.attempts > 1 ? fact("Sessions", task.attempts) : null,
        ...usageFacts(company, task),
      ),
      actions,
    );

    if (task.error) {
      parts.push(
        el(
          "section",
          { class: `reason ${task.status === "cancelled" ? "cancelled" : ""}`, role: task.status === "failed" ? "alert" : null },
          el("h3", {}, task.status === "cancelled" ? "Why it was cancelled" : "Why it failed"),
          el("p", {}, task.error),
        ),
      );
    }
    if (task.description && task.description !== task.title) {
      parts.push(section("Brief", el("p", { class: "pre" }, task.description)));
    }
    if (task.result) {
      parts.push(section("Result", markdown(task.result, { onFile: (p) => this.viewer.show(p, task.root_id) })));
    }
    const files = task.tree_files ?? task.files;
    if (files.length) {
      parts.push(
        section(
          `Files (${files.length})`,
          el(
            "ul",
            { class: "files" },
            files.map((f) =>
              el("li", {}, el("button", { type: "button", class: "file", onclick: () => this.viewer.show(f, task.root_id) }, f)),
            ),
          ),
        ),
      );
    }
    if (task.subtree.length) {
      parts.push(section(`Subtasks (${task.subtree.length})`, this.subtree(task)));
    }
    if (events.length) {
      parts.push(
        section(
          "Activity",
          el(
            "ol",
            { class: "mini-log" },
            events.slice(-60).map((e) => el("li", {}, el("time", {}, clock(e.ts)), ` ${e.kind}`, e.data?.text ? `: ${clip(visible(e.data.text), 140)}` : e.data?.summary ? `: ${clip(visible(e.data.summary), 140)}` : "")),
          ),
        ),
      );
    }
    const kept = this.replay ? [] : this.sections.map((s) => s.section(task)).filter(Boolean);
    this.place(parts.slice(0, 3), kept, parts.slice(3));
  }

  /** Fill the body: `before`, the kept nodes (never detached while shown), then `after`. */
  place(before, kept, after) {
    for (const child of [...this.body.children]) if (!kept.includes(child)) child.remove();
    for (const node of kept) if (node.parentNode !== this.body) this.body.append(node);
    this.body.prepend(...before);
    this.body.append(...after);
  }

  subtree(task) {
    const byParent = new Map();
    for (const t of task.subtree) {
      if (!byParent.has(t.parent_id)) byParent.set(t.parent_id, []);
      byParent.get(t.parent_id).push(t);
    }
    const branch = (parentId) => {
      const kids = byParent.get(parentId);
      if (!kids) return null;
      return el(
        "ul",
        { class: "tree" },
        kids.map((t) =>
          el(
            "li",
            {},
            el(
              "button",
              { type: "button", class: `tree-item s-${t.status}`, onclick: () => this.open(t.id, { push: true }), dataset: { task: t.id, status: t.status } },
              el("span", { class: "tree-icon", "aria-label": t.status }, STATUS_ICON[t.status]),
              el("span", { class: "tree-title" }, clip(t.title, 100)),
              el("span", { class: "tree-who" }, this.company.agent(t.assignee).name),
            ),
            t.status === "failed" && t.error ? el("p", { class: "tree-error" }, clip(t.error, 200)) : null,
            branch(t.id),
          ),
        ),
      );
    };
    return branch(task.id);
  }

  back() {
    const previous = this.history.pop();
    if (previous) this.open(previous);
  }

  async cancel(task, button) {
    button.disabled = true;
    button.textContent = "Cancelling…";
    try {
      const result = await api.cancel(task.id);
      this.toast(`Cancelled ${result.cancelled.length} task${result.cancelled.length === 1 ? "" : "s"}`);
      await this.load(false);
    } catch (error) {
      button.disabled = false;
      button.textContent = "Cancel task";
      if (error.status === 401) this.needToken(error.message);
      else this.toast(error.message, "bad");
    }
  }
}

function fact(term, value) {
  return el("div", {}, el("dt", {}, term), el("dd", {}, String(value)));
}

function usageFacts(company, task) {
  return usageLines(company, task).map(([term, value]) => fact(term, value));
}

function section(title, ...content) {
  return el("section", { class: "drawer-section" }, el("h3", {}, title), ...content);
}

class FileViewer {
  constructor() {
    this.dialog = document.getElementById("file-viewer");
    this.title = document.getElementById("viewer-title");
    this.body = document.getElementById("viewer-body");
    this.dialog.querySelector("[data-close]").addEventListener("click", () => this.dialog.close());
    this.dialog.addEventListener("click", (event) => {
      if (event.target === this.dialog) this.dialog.close();
    });
  }

  async show(path, run) {
    this.title.textContent = path;
    this.body.replaceChildren(el("p", { class: "muted" }, "Loading…"));
    if (!this.dialog.open) this.dialog.showModal();
    try {
      const { data, headers } = await api.file(path, run);
      const note = headers.get("x-firm-truncated") ? el("p", { class: "muted" }, "Showing the first MiB of a larger file.") : null;
      const content = /\.(md|markdown)$/i.test(path) ? markdown(data, { onFile: (p) => this.show(join(path, p), run) }) : el("pre", { class: "file-text" }, data);
      this.body.replaceChildren(...[note, content].filter(Boolean));
    } catch (error) {
      this.body.replaceChildren(el("p", { class: "error", role: "alert" }, error.message));
    }
  }
}

/** A link inside a workspace file is relative to the file's folder, unless it is a root path. */
function join(base, link) {
  if (link.includes("/") && !link.startsWith(".")) return link;
  const parts = base.split("/").slice(0, -1);
  for (const part of link.split("/")) {
    if (part === "..") parts.pop();
    else if (part !== ".") parts.push(part);
  }
  return parts.join("/");
}
