"""Detect the language of a goal, so the company answers in the language it was asked in.

A goal is a sentence or two, so a small, predictable detector serves better than a model:
the Unicode script decides for non-Latin text, and frequent function words decide among
Latin-script languages. Unknown or ambiguous text counts as English.
"""

from __future__ import annotations

import re
import unicodedata

_SCRIPTS: list[tuple[str, str]] = [
    ("HIRAGANA", "ja"),
    ("KATAKANA", "ja"),
    ("HANGUL", "ko"),
    ("CJK", "zh"),
    ("CYRILLIC", "ru"),
    ("ARABIC", "ar"),
    ("HEBREW", "he"),
    ("GREEK", "el"),
    ("THAI", "th"),
    ("DEVANAGARI", "hi"),
    ("BENGALI", "bn"),
    ("TAMIL", "ta"),
    ("ARMENIAN", "hy"),
    ("GEORGIAN", "ka"),
]

_WORDS: dict[str, set[str]] = {
    "en": set(
        [
            "the",
            "and",
            "of",
            "to",
            "a",
            "in",
            "for",
            "is",
            "on",
            "with",
            "that",
            "this",
            "an",
            "be",
            "by",
            "as",
            "are",
            "it",
            "from",
            "our",
            "we",
            "how",
            "what",
            "build",
            "make",
            "launch",
            "write",
            "create",
            "plan",
        ]
    ),
    "fr": set(
        [
            "le",
            "la",
            "les",
            "et",
            "des",
            "un",
            "une",
            "pour",
            "avec",
            "du",
            "est",
            "que",
            "dans",
            "sur",
            "nous",
            "pas",
            "au",
            "aux",
            "ce",
            "cette",
            "lancer",
            "une",
            "créer",
            "écrire",
            "plan",
        ]
    ),
    "de": set(
        [
            "der",
            "die",
            "das",
            "und",
            "ein",
            "eine",
            "für",
            "mit",
            "ist",
            "nicht",
            "zu",
            "den",
            "dem",
            "von",
            "auf",
            "wir",
            "ich",
            "im",
            "eines",
            "einen",
            "starten",
            "erstellen",
            "schreiben",
        ]
    ),
    "es": set(
        [
            "el",
            "la",
            "los",
            "las",
            "y",
            "de",
            "un",
            "una",
            "para",
            "con",
            "es",
            "que",
            "en",
            "por",
            "del",
            "nuestro",
            "nuestra",
            "al",
            "lanzar",
            "crear",
            "escribir",
            "plan",
        ]
    ),
    "it": set(
        [
            "il",
            "lo",
            "la",
            "gli",
            "le",
            "e",
            "di",
            "un",
            "una",
            "per",
            "con",
            "è",
            "che",
            "in",
            "del",
            "della",
            "nostro",
            "al",
            "lanciare",
            "creare",
            "scrivere",
            "piano",
        ]
    ),
    "pt": set(
        [
            "o",
            "a",
            "os",
            "as",
            "e",
            "de",
            "um",
            "uma",
            "para",
            "com",
            "é",
            "que",
            "em",
            "do",
            "da",
            "nosso",
            "nossa",
            "ao",
            "lançar",
            "criar",
            "escrever",
            "plano",
        ]
    ),
    "nl": set(
        [
            "de",
            "het",
            "een",
            "en",
            "van",
            "voor",
            "met",
            "is",
            "dat",
            "niet",
            "op",
            "we",
            "ik",
            "te",
            "zijn",
            "lanceren",
            "maken",
            "schrijven",
            "plan",
        ]
    ),
}

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


def detect_language(text: str) -> str:
    """An ISO 639-1 code for the text's language; 'en' when unsure."""
    counts: dict[str, int] = {}
    letters = 0
    for ch in text:
        if not ch.isalpha():
            continue
        letters += 1
        name = unicodedata.name(ch, "")
        for key, lang in _SCRIPTS:
            if key in name:
                counts[lang] = counts.get(lang, 0) + 1
                break
    if letters and counts:
        lang, n = max(counts.items(), key=lambda kv: kv[1])
        if n * 3 >= letters:
            # Japanese text mixes kana with kanji; any kana at all means Japanese, not Chinese.
            if lang == "zh" and counts.get("ja"):
                return "ja"
            return lang
    words = [w.casefold() for w in _WORD.findall(text)]
    scores = {lang: sum(w in vocab for w in words) for lang, vocab in _WORDS.items()}
    best = max(scores, key=lambda k: scores[k])
    if scores[best] == 0 or (
        list(scores.values()).count(scores[best]) > 1 and scores["en"] == (scores[best])
    ):
        return "en"
    return best
