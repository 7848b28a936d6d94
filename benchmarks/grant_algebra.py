"""Figures for the grant algebra on adversarial scope patterns: the worst case is what matters.

    python benchmarks/grant_algebra.py [--patterns 20]

A model chooses `delegate_task`'s `tools`, so every question the authority code asks about
them (intersection with what the delegator holds, containment in it, simplification) must stay
cheap however the patterns are built. This times each question on patterns made to be hard
(interleaved stars, repeated letters, sets and `?`) at the largest size a request may have,
and prints every figure (the best of three cold runs) and the worst. Each question either
answers or is refused (ScopeTooComplex / GrantError): both count, as long as they come quickly.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable

from firm.authority import grants as g
from firm.authority import scopes as sc
from firm.org import parse_org

STARS = g.SCOPE_STARS_MAX


def starred(letter: str, stars: int = STARS) -> str:
    """`*a*a*a*`: the shape whose intersections interleave."""
    return "*" + "*".join(letter * 1 for _ in range(stars - 1)) + "*"


def adversarial(count: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    shapes = []
    for i in range(count):
        a, b = letters[i % 26], letters[(i + 7) % 26]
        shapes.append(
            [
                starred(a),
                f"*{a}?{b}*{b}[{a}{b}]*{a}",
                f"*{a}{a}{a}*{a}{a}*{a}",
                f"*[{b}{a}]*{b}*[{a}-{b}]",
            ][i % 4]
        )
    return shapes


CACHES = ("_counterexample", "_minimal", "_intersect_sets", "_meet", "render", "_regex", "parse")
REPEAT = 3


def timed(what: str, fn: Callable[[], object]) -> float:
    """The best of REPEAT cold runs (every cache emptied first), so a shared machine's noise
    does not pass for the algebra's cost."""
    best = float("inf")
    for _ in range(REPEAT):
        for name in CACHES:
            getattr(sc, name).cache_clear()
        start = time.perf_counter()
        try:
            result = fn()
            outcome = f"{len(result)} pattern(s)" if isinstance(result, tuple) else repr(result)
        except (sc.ScopeTooComplex, g.GrantError) as exc:
            outcome = f"refused ({str(exc)[:60]}…)"
        best = min(best, (time.perf_counter() - start) * 1000)
    print(f"  {best:9.2f} ms  {what}: {outcome}")
    return best


def org_with(tools: list[str]) -> object:
    import yaml

    return parse_org(
        yaml.safe_dump(
            {
                "company": "Bench",
                "agents": [
                    {"id": "boss", "name": "B", "title": "Manager", "tools": tools},
                    {"id": "rep", "name": "R", "title": "Analyst", "reports_to": "boss"},
                ],
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patterns", type=int, default=g.REQUEST_SCOPES_MAX)
    args = parser.parse_args()
    pats = adversarial(args.patterns)
    others = [p.translate(str.maketrans("abcdefghij", "jihgfedcba")) for p in pats]
    figures = []
    print(f"grant algebra on {args.patterns} adversarial patterns ({STARS} '*' at most each)")
    figures.append(
        timed("*a*a*a*a* ∩ *b*b*b*b*", lambda: sc.intersect(["*a*a*a*a*"], ["*b*b*b*b*"]))
    )
    figures.append(timed("intersect(set, set)", lambda: sc.intersect(pats, others)))
    figures.append(timed("minimal(set ∪ set)", lambda: sc.minimal(pats + others)))
    for p, q in itertools.islice(zip(pats, others, strict=True), 6):
        figures.append(timed(f"{p} ∩ {q}", lambda p=p, q=q: sc.intersect([p], [q])))
        figures.append(timed(f"{p} inside set", lambda p=p: sc.covers(others, p)))
    figures.append(timed("every pattern inside the set", lambda: sc.within(pats, others)))
    boss = g.Grant.of(pats)
    org = org_with(pats)
    request = g.GrantRequest.build(tools=others)
    figures.append(
        timed(
            "derive_grant (a delegation asking for the set)",
            lambda: g.derive_grant(boss, org, "rep", request, 0.0, None).scopes,
        )
    )
    child = g.Grant.of(others)
    figures.append(timed("why_not_within(set, set)", lambda: tuple(g.why_not_within(child, boss))))
    print(f"worst case: {max(figures):.2f} ms over {len(figures)} questions")


if __name__ == "__main__":
    main()
