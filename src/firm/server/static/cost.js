// What the model calls cost, where people look: desks, the drawer, goal progress and the run
// picker. Calls and tokens come from the tasks' usage (the snapshot's, then every model_call
// event); a cost is estimated only where the org chart prices the agent's model
// (`llm.prices`, USD per million tokens), never guessed.

const EMPTY = Object.freeze({ calls: 0, prompt_tokens: 0, completion_tokens: 0, cached_tokens: 0 });

/** A task's usage after one more model call (the model_call event's data). */
export function withCall(usage, d) {
  const u = { ...EMPTY, ...(usage || {}) };
  return {
    calls: u.calls + 1,
    prompt_tokens: u.prompt_tokens + (d.prompt_tokens || 0),
    completion_tokens: u.completion_tokens + (d.completion_tokens || 0),
    cached_tokens: u.cached_tokens + (d.cached_tokens || 0),
  };
}

function add(total, usage) {
  if (!usage) return;
  total.calls += usage.calls || 0;
  total.prompt_tokens += usage.prompt_tokens || 0;
  total.completion_tokens += usage.completion_tokens || 0;
  total.cached_tokens += usage.cached_tokens || 0;
}

/** USD for this usage on the agent's model, or null when the chart gives it no price. */
export function estimate(company, agentId, usage) {
  const prices = company.org?.prices;
  const model = company.agents.get(agentId)?.model;
  const price = model && prices ? prices[model] : null;
  if (!price || !usage) return null;
  const prompt = usage.prompt_tokens || 0;
  const cached = Math.max(0, Math.min(usage.cached_tokens || 0, prompt));
  const cachedRate = price.cached_input ?? price.input;
  return ((prompt - cached) * price.input + cached * cachedRate + (usage.completion_tokens || 0) * price.output) / 1e6;
}

/** Each agent's usage and cost in each goal: agent -> root id -> {usage, cost}. */
export function usageByDesk(company) {
  const out = new Map();
  for (const task of company.tasks.values()) {
    if (!task.usage?.calls) continue;
    let runs = out.get(task.assignee);
    if (!runs) out.set(task.assignee, (runs = new Map()));
    let entry = runs.get(task.root_id);
    if (!entry) runs.set(task.root_id, (entry = { usage: { ...EMPTY }, cost: null }));
    add(entry.usage, task.usage);
  }
  for (const [agentId, runs] of out) {
    for (const entry of runs.values()) entry.cost = estimate(company, agentId, entry.usage);
  }
  return out;
}

/** A goal's usage over its whole tree, and its cost: null when any call is unpriced. */
export function runUsage(company, rootId) {
  const usage = { ...EMPTY };
  let cost = company.org?.prices && Object.keys(company.org.prices).length ? 0 : null;
  for (const task of company.tasks.values()) {
    if (task.root_id !== rootId || !task.usage?.calls) continue;
    add(usage, task.usage);
    const c = estimate(company, task.assignee, task.usage);
    cost = c === null || cost === null ? null : cost + c;
  }
  return { usage, cost };
}

export function formatCost(usd) {
  if (usd === null || usd === undefined) return "";
  if (usd === 0) return "$0";
  if (usd < 0.01) return `$${usd.toFixed(4)}`;
  if (usd < 100) return `$${usd.toFixed(2)}`;
  return `$${Math.round(usd).toLocaleString("en")}`;
}

export function formatTokens(n) {
  if (n < 1000) return String(n);
  if (n < 1e6) return `${(n / 1000).toFixed(n < 10_000 ? 1 : 0)}k`;
  return `${(n / 1e6).toFixed(1)}M`;
}

/** "3 calls · 1.2k tokens · $0.0012" (the cost only when priced); "" when no calls. */
export function usageText(usage, cost, { short = false } = {}) {
  if (!usage?.calls) return "";
  const tokens = (usage.prompt_tokens || 0) + (usage.completion_tokens || 0);
  const parts = [
    `${usage.calls} call${usage.calls === 1 ? "" : "s"}`,
    `${formatTokens(tokens)} ${short ? "tok" : "tokens"}`,
  ];
  if (cost !== null && cost !== undefined) parts.push(formatCost(cost));
  return parts.join(" · ");
}

/** The drawer's lines for a task (an API task detail): its own model use, and its tree's. */
export function usageLines(company, task) {
  const lines = [];
  if (task.usage?.calls) {
    lines.push(["Model calls", usageText(task.usage, estimate(company, task.assignee, task.usage))]);
  }
  const tree = [task, ...(task.subtree ?? [])].filter((t) => t.usage?.calls);
  if (tree.length > 1 || (tree.length === 1 && tree[0] !== task)) {
    const usage = { ...EMPTY };
    let cost = 0;
    for (const t of tree) {
      add(usage, t.usage);
      const c = estimate(company, t.assignee, t.usage);
      cost = c === null || cost === null ? null : cost + c;
    }
    lines.push(["With the tasks below", usageText(usage, cost)]);
  }
  return lines;
}
