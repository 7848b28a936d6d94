// Small helpers shared by the views: building elements safely, names, colours, time, text.

/** Create an element: el("p", {class: "x", onclick: f}, "text", child). Text is never HTML. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      node.addEventListener(key.slice(2), value);
    } else if (key === "dataset") {
      Object.assign(node.dataset, value);
    } else if (value === true) {
      node.setAttribute(key, "");
    } else {
      node.setAttribute(key, String(value));
    }
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export const STATUS_LABEL = {
  todo: "To do",
  in_progress: "Working",
  waiting: "Waiting",
  done: "Done",
  failed: "Failed",
  cancelled: "Cancelled",
};

export const STATUS_ICON = {
  todo: "○",
  in_progress: "▶",
  waiting: "‖",
  done: "✓",
  failed: "✕",
  cancelled: "⊘",
};

export const OPEN = new Set(["todo", "in_progress", "waiting"]);

export function initials(name) {
  const parts = String(name || "?").trim().split(/\s+/);
  const first = parts[0]?.[0] ?? "?";
  const last = parts.length > 1 ? parts[parts.length - 1][0] : "";
  return (first + last).toUpperCase();
}

/** A stable hue per agent id, so a person keeps their colour everywhere on the page. */
export function hue(id) {
  let h = 0;
  for (const ch of String(id)) h = (h * 31 + ch.codePointAt(0)) % 360;
  return h;
}

export function avatar(agent, size = "") {
  const a = el("span", { class: `avatar ${size}`.trim(), "aria-hidden": "true" }, initials(agent?.name ?? agent?.id));
  a.style.setProperty("--hue", hue(agent?.id ?? "?"));
  return a;
}

// One formatter for every clock on the page: toLocaleTimeString builds a new one per call.
const CLOCK = new Intl.DateTimeFormat([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });

export function clock(ts) {
  if (!ts) return "";
  return CLOCK.format(new Date(ts * 1000));
}

export function duration(seconds) {
  if (seconds == null || !isFinite(seconds)) return "";
  const s = Math.max(0, seconds);
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(Math.floor(s % 60)).padStart(2, "0")}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, "0")}m`;
}

export function elapsed(task, now = Date.now() / 1000) {
  if (!task.started_at) return "";
  return duration((task.finished_at ?? now) - task.started_at);
}

// Characters a reader cannot see, or that reorder what they see (a right-to-left override can
// make "001" read "100"). Arguments and summaries come from models: these are spelled out.
export const INVISIBLE = /[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb]/g;

/** Text from a model with its invisible and direction-changing characters as \u escapes. */
export function visible(text) {
  return String(text ?? "").replace(INVISIBLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

export function clip(text, n) {
  const t = String(text ?? "").replace(/\s+/g, " ").trim();
  return t.length > n ? t.slice(0, n - 1) + "…" : t;
}

export function statusPill(status) {
  return el(
    "span",
    { class: `pill s-${status}` },
    el("span", { class: "pill-icon", "aria-hidden": "true" }, STATUS_ICON[status] ?? "•"),
    STATUS_LABEL[status] ?? status,
  );
}

/** Run fn at most once per animation frame, however often it is asked for. */
export function perFrame(fn) {
  let queued = false;
  return () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      fn();
    });
  };
}

export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

export const reducedMotion = window.matchMedia("(prefers-reduced-motion: reduce)");

/**
 * A little Markdown for results and files: headings, lists, emphasis, code, links to
 * workspace files. Built from DOM nodes, so nothing an agent writes can become markup.
 */
export function markdown(text, { onFile } = {}) {
  const root = el("div", { class: "md" });
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  let list = null;
  let code = null;
  let para = [];
  const flush = () => {
    if (para.length) root.append(el("p", {}, inline(para.join(" "), onFile)));
    para = [];
  };
  for (const line of lines) {
    if (code) {
      if (/^```/.test(line)) {
        root.append(el("pre", {}, el("code", {}, code.join("\n"))));
        code = null;
      } else code.push(line);
      continue;
    }
    if (/^```/.test(line)) {
      flush();
      list = null;
      code = [];
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const item = /^\s*(?:[-*+]|\d+[.)])\s+(.*)$/.exec(line);
    if (heading) {
      flush();
      list = null;
      const level = Math.min(6, heading[1].length + 2);
      root.append(el(`h${level}`, {}, inline(heading[2], onFile)));
    } else if (item) {
      flush();
      if (!list) {
        list = el("ul");
        root.append(list);
      }
      list.append(el("li", {}, inline(item[1], onFile)));
    } else if (!line.trim()) {
      flush();
      list = null;
    } else {
      list = null;
      para.push(line.trim());
    }
  }
  if (code) root.append(el("pre", {}, el("code", {}, code.join("\n"))));
  flush();
  return root;
}

function inline(text, onFile) {
  const out = [];
  const pattern = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*\s][^*]*\*)|(\[[^\]]+\]\([^)\s]+\))/g;
  let last = 0;
  for (const m of text.matchAll(pattern)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    const token = m[0];
    if (m[1]) out.push(el("code", {}, token.slice(1, -1)));
    else if (m[2]) out.push(el("strong", {}, token.slice(2, -2)));
    else if (m[3]) out.push(el("em", {}, token.slice(1, -1)));
    else {
      const [, label, target] = /^\[([^\]]+)\]\(([^)\s]+)\)$/.exec(token);
      if (onFile && !/^[a-z]+:/i.test(target) && !target.startsWith("/")) {
        // A link (not a button) so a long path wraps inside the sentence like text does.
        out.push(
          el(
            "a",
            {
              href: "#",
              class: "link",
              onclick: (event) => {
                event.preventDefault();
                onFile(target);
              },
            },
            label,
          ),
        );
      } else out.push(label);
    }
    last = m.index + token.length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

/** Whether this browser can draw WebGL at all (the context is not kept). */
export function webglAvailable() {
  try {
    const canvas = document.createElement("canvas");
    return Boolean(canvas.getContext("webgl2") || canvas.getContext("webgl"));
  } catch {
    return false;
  }
}
