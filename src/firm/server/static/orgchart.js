// The org chart: who reports to whom, what each may do, and a way to hand anyone a goal.

import { avatar, el } from "./util.js";

export function renderOrgChart(root, company, { onGiveGoal }) {
  const org = company.org;
  if (!org) return;
  const node = (agent) => {
    const reports = agent.reports.map((id) => company.agents.get(id)).filter(Boolean);
    return el(
      "li",
      {},
      el(
        "div",
        { class: "org-node", dataset: { agent: agent.id } },
        avatar(agent, "md"),
        el(
          "div",
          { class: "org-who" },
          el("strong", {}, agent.name),
          el("span", {}, agent.title),
          el(
            "span",
            { class: "org-meta" },
            reports.length ? `${reports.length} report${reports.length === 1 ? "" : "s"} · ` : "",
            `tools: ${agent.tools.length ? agent.tools.join(", ") : "none"}`,
          ),
        ),
        el(
          "button",
          {
            type: "button",
            class: "ghost small",
            onclick: () => onGiveGoal(agent.id),
            "aria-label": `Give ${agent.name} a goal`,
          },
          "Give a goal",
        ),
      ),
      reports.length ? el("ul", {}, reports.map(node)) : null,
    );
  };
  root.replaceChildren(
    el(
      "div",
      { class: "org-head" },
      el("h2", {}, org.company),
      org.description ? el("p", {}, org.description) : null,
      el(
        "p",
        { class: "org-facts" },
        `${org.agents.length} agents · up to ${org.max_concurrent} at work at once · brain: ${org.brain}`,
      ),
    ),
    el(
      "ul",
      { class: "org-tree", "aria-label": "Org chart" },
      org.top.map((id) => node(company.agents.get(id))),
    ),
  );
}
