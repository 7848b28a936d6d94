from __future__ import annotations

import pytest

from firm.language import detect_language


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("Launch an AI note-taking app", "en"),
        ("Lancer une application de prise de notes pour les équipes", "fr"),
        ("Eine Notiz-App mit KI für das Team starten", "de"),
        ("Lanzar una aplicación de notas con IA para los equipos", "es"),
        ("Запустить приложение для заметок", "ru"),
        ("AIメモアプリをリリースする", "ja"),
        ("推出一款人工智能笔记应用", "zh"),
        ("AI 노트 앱 출시", "ko"),
        ("12345", "en"),
    ],
)
def test_detects_the_language_of_a_goal(text: str, lang: str) -> None:
    assert detect_language(text) == lang
