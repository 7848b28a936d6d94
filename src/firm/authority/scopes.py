"""Tool scopes: dotted names and globs (`files.read`, `crm.*`, `*`). Pure functions.

A scope is a shell-style glob, matched against the whole dotted tool name: `*` matches any run
of characters (dots included, so `crm.*` covers `crm.query` and `crm.reports.daily`), `?` one
character, `[abc]` / `[a-z]` / `[!abc]` one character of (or not of) a set. Everything else is
literal. This is what fnmatch does; it is re-implemented here because authority needs two
things fnmatch cannot give: the exact intersection of two globs (what a delegator holds met
with what a delegate declares) and an exact containment test (is one set of globs inside
another), both decided on the languages the globs match, not on their spelling.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Sequence
from functools import cache, lru_cache

MAX_CHAR = 0x10FFFF

# A token is STAR or a character set: a sorted tuple of disjoint, non-adjacent inclusive ranges.
Ranges = tuple[tuple[int, int], ...]
Token = Ranges | None  # None is `*`
Glob = tuple[Token, ...]
STAR: Token = None
ANY: Ranges = ((0, MAX_CHAR),)


# --- parsing and printing ------------------------------------------------------------------


def _normalise(ranges: Iterable[tuple[int, int]]) -> Ranges:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(r for r in ranges if r[0] <= r[1]):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def _complement(ranges: Ranges) -> Ranges:
    out, start = [], 0
    for lo, hi in ranges:
        if lo > start:
            out.append((start, lo - 1))
        start = hi + 1
    if start <= MAX_CHAR:
        out.append((start, MAX_CHAR))
    return tuple(out)


def _intersect_ranges(a: Ranges, b: Ranges) -> Ranges:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _parse_set(pattern: str, i: int) -> tuple[Ranges, int] | None:
    """Parse `[...]` starting after the `[`; None when unclosed (then `[` is a literal)."""
    j = i
    if j < len(pattern) and pattern[j] == "!":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 1
    if j >= len(pattern):
        return None
    body = pattern[i:j]
    negate = body.startswith("!")
    if negate:
        body = body[1:]
    ranges: list[tuple[int, int]] = []
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            ranges.append((ord(body[k]), ord(body[k + 2])))  # an inverted range is empty
            k += 3
        else:
            ranges.append((ord(body[k]), ord(body[k])))
            k += 1
    result = _normalise(ranges)
    return (_complement(result) if negate else result), j + 1


@lru_cache(maxsize=4096)
def parse(pattern: str) -> Glob:
    tokens: list[Token] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            if not tokens or tokens[-1] is not STAR:
                tokens.append(STAR)
            i += 1
        elif c == "?":
            tokens.append(ANY)
            i += 1
        elif c == "[" and (parsed := _parse_set(pattern, i + 1)) is not None:
            tokens.append(parsed[0])
            i = parsed[1]
        else:
            tokens.append(((ord(c), ord(c)),))
            i += 1
    return tuple(tokens)


_SPECIAL = frozenset("*?[")


def _set_body(ranges: Ranges) -> str:
    """The inside of `[...]` for a set. `]` goes first and `-` last, where they are literal;
    they are cut out of ranges first so no range starts or ends on one."""
    bracket = any(lo <= ord("]") <= hi for lo, hi in ranges)
    dash = any(lo <= ord("-") <= hi for lo, hi in ranges)
    rest = _intersect_ranges(ranges, _complement(((ord("-"), ord("-")), (ord("]"), ord("]")))))
    parts = []
    for lo, hi in rest:
        if hi - lo > 1:
            parts.append(f"{chr(lo)}-{chr(hi)}")
        else:
            parts.extend(chr(c) for c in range(lo, hi + 1))
    # `!` first would negate the set: put another part first when there is one.
    if parts and parts[0].startswith("!") and len(parts) > 1:
        parts = parts[1:] + parts[:1]
    return ("]" if bracket else "") + "".join(parts) + ("-" if dash else "")


def render(glob: Glob) -> str:
    out = []
    for tok in glob:
        if tok is STAR:
            out.append("*")
        elif tok == ANY:
            out.append("?")
        elif len(tok) == 1 and tok[0][0] == tok[0][1] and chr(tok[0][0]) not in _SPECIAL:
            out.append(chr(tok[0][0]))
        else:
            pos, neg = _set_body(tok), _set_body(_complement(tok))
            if pos and not pos.startswith("!") and (len(pos) <= len(neg) + 1 or not neg):
                out.append(f"[{pos}]")
            else:
                out.append(f"[!{neg}]")
    return "".join(out)


# --- matching ------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _regex(pattern: str) -> re.Pattern[str]:
    parts = []
    for tok in parse(pattern):
        if tok is STAR:
            parts.append(".*")
        else:
            parts.append(
                "["
                + "".join(
                    re.escape(chr(lo)) if lo == hi else f"{re.escape(chr(lo))}-{re.escape(chr(hi))}"
                    for lo, hi in tok
                )
                + "]"
            )
    return re.compile("".join(parts), re.DOTALL)


def matches(pattern: str, name: str) -> bool:
    return _regex(pattern).fullmatch(name) is not None


def allows(patterns: Iterable[str], tool_name: str) -> bool:
    return any(matches(p, tool_name) for p in patterns)


# --- containment: L(inner) ⊆ L(p1) ∪ L(p2) ∪ ... -----------------------------------------

State = frozenset[tuple[int, int]]  # (which glob, position in it)


def _closure(globs: Sequence[Glob], states: Iterable[tuple[int, int]]) -> State:
    out = set()
    for g, pos in states:
        while True:
            out.add((g, pos))
            if pos < len(globs[g]) and globs[g][pos] is STAR:
                pos += 1
            else:
                break
    return _prune(globs, out)


def _prune(globs: Sequence[Glob], states: set[tuple[int, int]]) -> State:
    """Drop every position of a glob that lies before a `*` of it the set already holds.

    What a glob still accepts from a `*` onwards includes what it accepts from any earlier
    position (the `*` can swallow whatever that position would have matched), so the later
    position decides alone. Without this the subset construction keeps one state per way of
    spreading progress over the stars (`*a*a*a*` sees exponentially many); with it a glob's
    states are its last reached `*` plus positions inside one star-free segment.
    """
    last_star: dict[int, int] = {}
    for g, pos in states:
        if pos < len(globs[g]) and globs[g][pos] is STAR and pos > last_star.get(g, -1):
            last_star[g] = pos
    if not last_star:
        return frozenset(states)
    return frozenset((g, pos) for g, pos in states if pos >= last_star.get(g, -1))


def _step(globs: Sequence[Glob], states: State, ch: int) -> State:
    nxt = []
    for g, pos in states:
        if pos >= len(globs[g]):
            continue
        tok = globs[g][pos]
        if tok is STAR:
            nxt.append((g, pos))
        elif any(lo <= ch <= hi for lo, hi in tok):
            nxt.append((g, pos + 1))
    return _closure(globs, nxt)


def _accepts(globs: Sequence[Glob], states: State) -> bool:
    return any(pos == len(globs[g]) for g, pos in states)


def _alphabet(globs: Iterable[Glob]) -> list[int]:
    """One representative character per class of characters no glob tells apart."""
    points = {0}
    for glob in globs:
        for tok in glob:
            if tok is not STAR:
                for lo, hi in tok:
                    points.add(lo)
                    if hi < MAX_CHAR:
                        points.add(hi + 1)
    return sorted(points)


class ScopeTooComplex(ValueError):
    """A question about scopes would take more work than `SEARCH_LIMIT` allows.

    Containment of one glob in a union of globs is hard in general (the union's automaton can
    have exponentially many states), so the search is bounded and a caller that cannot get an
    answer refuses (a delegation) or keeps what it has (a simplification), never widens.
    """


# States of the product automaton explored before giving up. A union of ordinary scopes
# (`crm.*`, `files.read`) needs tens; a pathological one is refused within milliseconds.
SEARCH_LIMIT = 200


def counterexample(outer: Iterable[str], inner: str, limit: int = SEARCH_LIMIT) -> str | None:
    """A tool name `inner` matches and no pattern of `outer` does, or None if there is none.
    Raises ScopeTooComplex when deciding it would explore more than `limit` states."""
    return _counterexample(tuple(outer), inner, limit)


# Scope sets come from a company's org chart and repeat on every delegation and check: the
# answers are cached, so the automaton walk is paid once per distinct question.
@lru_cache(maxsize=16384)
def _counterexample(outer: tuple[str, ...], inner: str, limit: int) -> str | None:
    inner_g = parse(inner)
    outer_g = [parse(p) for p in outer]
    alphabet = _alphabet([inner_g, *outer_g])
    a0, b0 = _closure([inner_g], [(0, 0)]), _closure(outer_g, [(i, 0) for i in range(len(outer_g))])
    seen = {(a0, b0)}
    queue: deque[tuple[State, State, str]] = deque([(a0, b0, "")])
    while queue:
        a, b, word = queue.popleft()
        if _accepts([inner_g], a) and not _accepts(outer_g, b):
            return word
        for ch in alphabet:
            a2 = _step([inner_g], a, ch)
            if not a2:
                continue
            b2 = _step(outer_g, b, ch)
            if (a2, b2) not in seen:
                if len(seen) >= limit:
                    raise ScopeTooComplex(
                        f"whether {inner!r} is inside {len(outer)} pattern(s) takes more than "
                        f"{limit} automaton states to decide"
                    )
                seen.add((a2, b2))
                queue.append((a2, b2, word + chr(ch)))
    return None


def covers(outer: Iterable[str], inner: str, limit: int = SEARCH_LIMIT) -> bool:
    """Whether every name `inner` matches is matched by some pattern in `outer`."""
    return counterexample(list(outer), inner, limit) is None


def within(inner: Iterable[str], outer: Iterable[str]) -> bool:
    """Whether the scope set `inner` allows nothing `outer` does not."""
    outer = list(outer)
    return all(covers(outer, p) for p in inner)


def is_empty(pattern: str) -> bool:
    return covers([], pattern)


# --- intersection ----------------------------------------------------------------------------


def _intersect(p: Glob, q: Glob) -> set[Glob]:
    @cache
    def go(i: int, j: int) -> frozenset[Glob]:
        if i == len(p) and j == len(q):
            return frozenset({()})
        if i == len(p):
            return frozenset({()}) if all(t is STAR for t in q[j:]) else frozenset()
        if j == len(q):
            return frozenset({()}) if all(t is STAR for t in p[i:]) else frozenset()
        x, y = p[i], q[j]
        if x is STAR and y is STAR:
            # Whichever star ends first, the rest of its glob meets the other glob still open.
            return frozenset((STAR, *s) for s in go(i + 1, j) | go(i, j + 1))
        if x is STAR:
            assert y is not STAR
            return go(i + 1, j) | frozenset((y, *s) for s in go(i, j + 1))
        if y is STAR:
            return go(i, j + 1) | frozenset((x, *s) for s in go(i + 1, j))
        both = _intersect_ranges(x, y)
        if not both:
            return frozenset()
        return frozenset((both, *s) for s in go(i + 1, j + 1))

    return {_squash(g) for g in go(0, 0)}


def _squash(glob: Glob) -> Glob:
    out: list[Token] = []
    for tok in glob:
        if tok is STAR and out and out[-1] is STAR:
            continue
        out.append(tok)
    return tuple(out)


def minimal(patterns: Iterable[str]) -> tuple[str, ...]:
    """The same language with no pattern another one already covers; sorted, for one spelling."""
    return _minimal(frozenset(patterns))


@lru_cache(maxsize=4096)
def _minimal(patterns: frozenset[str]) -> tuple[str, ...]:
    unique = sorted(patterns, key=lambda p: (-len(p), p))
    unique = [p for p in unique if not is_empty(p)]
    if len(unique) > MINIMAL_PAIRWISE_MAX:
        # Comparing every pair grows with the square of the count; a set this large only
        # arises from interleaved stars, whose parts rarely contain each other.
        return tuple(sorted(unique))
    # One glob inside another is a product of two small automata: always cheap, so it goes
    # first and removes most of what a union check would otherwise have to.
    kept: list[str] = []
    for i, p in enumerate(unique):
        others = kept + unique[i + 1 :]
        if not any(_inside_one(q, p) for q in others):
            kept.append(p)
    # Covered only by several together: worth a bounded look; when the look is too costly the
    # pattern stays, which keeps the language (only the spelling is longer).
    if len(kept) <= MINIMAL_UNION_MAX:
        for p in list(kept):
            others = [q for q in kept if q != p]
            try:
                if others and covers(others, p, MINIMAL_UNION_LIMIT):
                    kept.remove(p)
            except ScopeTooComplex:
                pass
    return tuple(sorted(kept))


def _inside_one(outer: str, inner: str) -> bool:
    try:
        return covers([outer], inner)
    except ScopeTooComplex:
        return False


MINIMAL_PAIRWISE_MAX = 16
MINIMAL_UNION_MAX = 8
MINIMAL_UNION_LIMIT = 200


def intersect(a: Iterable[str], b: Iterable[str]) -> tuple[str, ...]:
    """The scope set allowing exactly the tool names both `a` and `b` allow."""
    return _intersect_sets(tuple(a), tuple(b))


@lru_cache(maxsize=4096)
def _intersect_sets(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    out: set[str] = set()
    for p in a:
        for q in b:
            if covers([q], p):
                out.add(p)
            elif covers([p], q):
                out.add(q)
            else:
                out.update(render(g) for g in _intersect(parse(p), parse(q)))
            if len(out) > INTERSECTION_MAX:
                raise ScopeTooComplex(
                    f"the scopes {list(a)!r} and {list(b)!r} meet in more than "
                    f"{INTERSECTION_MAX} patterns"
                )
    return minimal(out)


# Two globs with k stars each can meet in C(2k, k) interleavings; beyond this many patterns
# the result is refused rather than carried through every later check.
INTERSECTION_MAX = 128
