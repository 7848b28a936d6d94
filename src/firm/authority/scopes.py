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
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Sequence
from functools import cache, lru_cache
from typing import Final

MAX_CHAR = 0x10FFFF

# A token is STAR or a character set: a sorted tuple of disjoint, non-adjacent inclusive ranges.
Ranges = tuple[tuple[int, int], ...]
Token = Ranges | None  # None is `*`
Glob = tuple[Token, ...]
STAR: Final = None
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


@lru_cache(maxsize=16384)
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


def _class(ranges: Ranges) -> str:
    return "".join(
        re.escape(chr(lo)) if lo == hi else f"{re.escape(chr(lo))}-{re.escape(chr(hi))}"
        for lo, hi in ranges
    )


@lru_cache(maxsize=4096)
def _regex(pattern: str) -> re.Pattern[str]:
    parts = []
    for tok in parse(pattern):
        if tok is STAR:
            parts.append(".*")
        elif tok == ANY:
            parts.append(".")
        elif not tok:
            parts.append("(?!)")
        else:
            # A class spanning most of Unicode compiles slowly (milliseconds): spell the
            # smaller side, a set or its complement.
            neg = _complement(tok)
            parts.append(f"[^{_class(neg)}]" if len(neg) < len(tok) else f"[{_class(tok)}]")
    return re.compile("".join(parts), re.DOTALL)


def matches(pattern: str, name: str) -> bool:
    return _regex(pattern).fullmatch(name) is not None


def allows(patterns: Iterable[str], tool_name: str) -> bool:
    return _allows(patterns if isinstance(patterns, tuple) else tuple(patterns), tool_name)


@lru_cache(maxsize=16384)
def _allows(patterns: tuple[str, ...], tool_name: str) -> bool:
    # Asked at every tool call (the offer, the check, the simulation brain's test) of the
    # same few grants and tool names: a pure answer, kept.
    return any(matches(p, tool_name) for p in patterns)


# --- containment: L(inner) ⊆ L(p1) ∪ L(p2) ∪ ... -----------------------------------------
#
# The globs' positions are packed into one integer, a bit per position (position len(glob) is
# the glob's end), so a set of states is an int and a step is a handful of int operations:
# a quarter of the cost of walking sets of (glob, position) pairs, which matters because every
# delegation asks tens of these questions of patterns a model chose.


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


class _Automaton:
    """The union of some globs as a bit-parallel NFA over an alphabet of character classes."""

    __slots__ = ("accept", "below", "final", "full", "star", "start")

    def __init__(self, globs: Sequence[Glob], alphabet: Sequence[int]) -> None:
        self.star = self.final = self.full = start = 0
        self.below: dict[int, int] = {}  # a star's bit -> its glob's bits before it
        accept = [0] * len(alphabet)
        base = 0
        for glob in globs:
            start |= 1 << base
            for k, tok in enumerate(glob):
                bit = 1 << (base + k)
                if tok is STAR:
                    self.star |= bit
                    self.below[bit] = bit - (1 << base)
                    if k == len(glob) - 1:
                        self.full |= bit  # a trailing `*`: everything from here on matches
                    continue
                for lo, hi in tok:
                    # Alphabet points are class boundaries, so a range covers a run of classes.
                    i = bisect_left(alphabet, lo)
                    while i < len(alphabet) and alphabet[i] <= hi:
                        accept[i] |= bit
                        i += 1
            self.final |= 1 << (base + len(glob))
            base += len(glob) + 1
        self.accept = accept
        self.start = self._settle(start)

    def _settle(self, states: int) -> int:
        # A `*` may match nothing: reaching it reaches the position after it too (stars never
        # sit side by side, parse() squashes them).
        states |= (states & self.star) << 1
        # Drop every position of a glob before a `*` of it the set already holds: what a glob
        # still accepts from a `*` onwards includes what it accepts from any earlier position,
        # so the later position decides alone. Without this the subset construction keeps one
        # state per way of spreading progress over the stars (`*a*a*a*` sees exponentially
        # many); with it a glob's states are its last reached `*` plus one star-free segment.
        stars = states & self.star
        while stars:
            bit = stars & -stars
            states &= ~self.below[bit]
            stars ^= bit
        return states

    def step(self, states: int, moved: int) -> int:
        """The states after one character, given which of `states` that character moves on
        (`states & accept[cls]`): classes that move the same positions share one step."""
        return self._settle((moved << 1) | (states & self.star))


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


def _quick_witness(outer: tuple[str, ...], inner_g: Glob) -> str | None:
    """Try the names most likely to tell the globs apart before any automaton is built: the
    shortest name `inner` matches, and the same with each `*` filled by a character no outer
    pattern mentions. Most questions whose answer is no end here, at regex speed."""
    outer_chars = {lo for p in outer for tok in parse(p) if tok is not STAR for lo, _ in tok}
    fill = next(c for c in range(0x4E00, 0x4E00 + len(outer_chars) + 2) if c not in outer_chars)
    for star in ("", chr(fill)):
        word = "".join(star if tok is STAR else chr(tok[0][0]) for tok in inner_g)
        if not any(matches(p, word) for p in outer):
            return word
    return None


# Scope sets come from a company's org chart and repeat on every delegation and check: the
# answers are cached, so the automaton walk is paid once per distinct question.
@lru_cache(maxsize=16384)
def _counterexample(outer: tuple[str, ...], inner: str, limit: int) -> str | None:
    if inner in outer:
        # A pattern covers itself, however many states deciding it by automaton would take:
        # a grant is within itself, and a meet is within its other spelling.
        return None
    inner_g = parse(inner)
    if any(not tok for tok in inner_g if tok is not STAR):
        return None  # an empty set matches no character: the glob matches no name
    if (word := _quick_witness(outer, inner_g)) is not None:
        return word
    outer_g = [parse(p) for p in outer]
    alphabet = _alphabet([inner_g, *outer_g])
    a_auto, b_auto = _Automaton([inner_g], alphabet), _Automaton(outer_g, alphabet)
    a_final, b_final, b_full = a_auto.final, b_auto.final, b_auto.full
    a_accept, b_accept = a_auto.accept, b_auto.accept
    start = (a_auto.start, b_auto.start)
    parent: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {start: None}
    queue = deque([start])
    classes = range(len(alphabet))
    while queue:
        pair = queue.popleft()
        a, b = pair
        if a & a_final and not b & b_final:
            return _word(parent, pair, alphabet)
        if b & b_full:
            continue  # an outer glob is at its trailing `*`: it matches every continuation
        moves: dict[tuple[int, int], int] = {}
        for cls in classes:
            moves.setdefault((a & a_accept[cls], b & b_accept[cls]), cls)
        for (a_moved, b_moved), cls in moves.items():
            a2 = a_auto.step(a, a_moved)
            if not a2:
                continue
            nxt = (a2, b_auto.step(b, b_moved))
            if nxt not in parent:
                if len(parent) >= limit:
                    raise ScopeTooComplex(
                        f"whether {inner!r} is inside {len(outer)} pattern(s) takes more than "
                        f"{limit} automaton states to decide"
                    )
                parent[nxt] = (pair, cls)
                queue.append(nxt)
    return None


def _word(
    parent: dict[tuple[int, int], tuple[tuple[int, int], int] | None],
    pair: tuple[int, int],
    alphabet: Sequence[int],
) -> str:
    chars = []
    while (link := parent[pair]) is not None:
        pair, cls = link
        chars.append(chr(alphabet[cls]))
    return "".join(reversed(chars))


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
            out.update(_meet(p, q))
            if len(out) > INTERSECTION_MAX:
                raise ScopeTooComplex(
                    f"the scopes {list(a)!r} and {list(b)!r} meet in more than "
                    f"{INTERSECTION_MAX} patterns"
                )
    return minimal(out)


@lru_cache(maxsize=16384)
def _meet(p: str, q: str) -> tuple[str, ...]:
    """The globs matching exactly what both `p` and `q` match; a pair repeats across the sets a
    delegation meets (what the delegator holds, what the chart gives, what is asked)."""
    if covers([q], p):
        return (p,)
    if covers([p], q):
        return (q,)
    return tuple(render(g) for g in _intersect(parse(p), parse(q)))


# Two globs with k stars each can meet in C(2k, k) interleavings; beyond this many patterns
# the result is refused rather than carried through every later check.
INTERSECTION_MAX = 128
