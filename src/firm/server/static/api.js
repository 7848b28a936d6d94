// Talking to the office: HTTP calls with the access token, and the live WebSocket.

const TOKEN_KEY = "firm.office.token";

/** The token from the address (#token=…, as `firm serve` prints it), kept for this browser. */
export function takeTokenFromAddress() {
  const match = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
  if (match) {
    setToken(decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
}

export function getToken() {
  try {
    return localStorage.getItem(TOKEN_KEY) || "";
  } catch {
    return "";
  }
}

export function setToken(token) {
  try {
    if (token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
  } catch {
    /* private mode: the token lives as long as the page */
  }
  memoryToken = token;
}

let memoryToken = "";
const token = () => getToken() || memoryToken;

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function explain(body, status) {
  const detail = body?.detail;
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail
      .map((d) => `${(d.loc || []).filter((p) => p !== "body").join(".") || "request"}: ${d.msg}`)
      .join("; ");
  }
  return `the office answered ${status}`;
}

export async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, "the office cannot be reached; is `firm serve` still running?");
  }
  const type = response.headers.get("content-type") || "";
  const data = type.includes("json") ? await response.json().catch(() => null) : await response.text();
  if (!response.ok) throw new ApiError(response.status, explain(data, response.status));
  return { data, headers: response.headers };
}

export const api = {
  submit: (goal, to) => call("POST", "/api/tasks", to ? { goal, to } : { goal }).then((r) => r.data),
  task: (id) => call("GET", `/api/tasks/${encodeURIComponent(id)}`).then((r) => r.data),
  cancel: (id) => call("POST", `/api/tasks/${encodeURIComponent(id)}/cancel`, {}).then((r) => r.data),
  events: (task, after = 0, limit = 200) =>
    call("GET", `/api/events?task=${encodeURIComponent(task)}&after=${after}&limit=${limit}`).then((r) => r.data),
  runs: (limit = 50, offset = 0) => call("GET", `/api/runs?limit=${limit}&offset=${offset}`).then((r) => r.data),
  runEvents: (run, after = 0, limit = 1000) =>
    call("GET", `/api/runs/${encodeURIComponent(run)}/events?after=${after}&limit=${limit}`).then((r) => r.data),
  file: (path, run) => {
    const where = path.split("/").map(encodeURIComponent).join("/");
    return call("GET", `/api/files/${where}${run ? `?run=${encodeURIComponent(run)}` : ""}`);
  },
};

/**
 * The live feed: a snapshot, then events in order. Reconnects on its own with the last
 * sequence number it saw, so nothing is missed; gives up only when the token is refused.
 */
export class Live {
  constructor({ onSnapshot, onEvents, onState, onStream }) {
    this.onSnapshot = onSnapshot;
    this.onEvents = onEvents;
    this.onState = onState;
    this.onStream = onStream;
    this.seq = null;
    this.retry = 0;
    this.socket = null;
    this.stopped = false;
  }

  connect() {
    this.stopped = false;
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    // streams=1: what agents are writing now, live only (onStream), between the log's events.
    const after = this.seq == null ? "?streams=1" : `?streams=1&after=${this.seq}`;
    const protocols = ["firm"];
    const t = token();
    if (t && /^[\w.~-]+$/.test(t)) protocols.push(`token.${t}`);
    const url = `${scheme}://${location.host}/api/ws${after}`;
    const socket = new WebSocket(url, protocols);
    this.socket = socket;
    this.onState(this.seq == null ? "connecting" : "reconnecting");
    socket.onmessage = (message) => {
      const data = JSON.parse(message.data);
      if (data.type === "snapshot") {
        this.retry = 0;
        this.onState("live");
        if (this.seq == null) this.seq = data.seq;
        this.onSnapshot(data);
      } else if (data.type === "stream") {
        this.onStream?.(data.desks);
      } else if (data.type === "events" && data.events.length) {
        const fresh = data.events.filter((e) => this.seq == null || e.seq > this.seq);
        if (fresh.length) {
          this.seq = fresh[fresh.length - 1].seq;
          this.onEvents(fresh);
        }
      }
    };
    socket.onclose = (event) => {
      if (this.socket !== socket || this.stopped) return;
      if (event.code === 4401) {
        this.onState("locked", event.reason);
        return;
      }
      this.onState("reconnecting");
      const wait = Math.min(10_000, 500 * 2 ** this.retry++);
      setTimeout(() => this.connect(), wait);
    };
  }

  reconnect() {
    this.stop();
    this.connect();
  }

  stop() {
    this.stopped = true;
    if (this.socket) this.socket.close();
    this.socket = null;
  }
}
