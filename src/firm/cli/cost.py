"""What a task tree's model calls cost, for `firm show`: priced with the run's own org chart
(`llm.prices`), at the model each agent ran on."""

from __future__ import annotations

from firm.api import Firm
from firm.errors import FirmError
from firm.org import parse_org
from firm.pricing import estimate, total
from firm.tasks import Task


def tree_cost(firm: Firm, root_id: str, tasks: list[Task]) -> float | None:
    """USD for the tasks' usage; None when the run's chart prices none of its models, or a
    model that made calls has no price."""
    try:
        spec = firm.store.run(root_id)
        org = parse_org(spec.org_yaml, spec.org_source)
    except (FirmError, LookupError):
        return None
    prices = org.llm.prices if org.llm else None
    if not prices:
        return None
    option = spec.brain_options.get("model")
    run_model = option if isinstance(option, str) else None
    return total(
        [
            estimate(
                prices,
                org.model_of(t.assignee, run_model),
                t.usage.get("prompt_tokens", 0),
                t.usage.get("completion_tokens", 0),
            )
            for t in tasks
            if t.usage.get("calls")
        ]
    )
