"""The loop reads its trigger files, threshold and ask-the-user switch from the settings."""

from __future__ import annotations

from pathlib import Path

from librarian.config import Settings
from librarian.correction.loop import SelfCorrectingCorrector
from librarian.correction.triggers import classify_failure


def test_trigger_files_threshold_and_ask_user_come_from_settings(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n"
        "  - id: quota-exceeded\n"
        "    description: the service's quota ran out for now\n"
        "    category: transient\n"
        "    priority: 5\n"
        "    patterns: ['quota exceeded, retry later']\n",
        encoding="utf-8",
    )
    settings = Settings(
        home=tmp_path / "home",
        correction_trigger_files=[rules],
        correction_confidence_threshold=0.9,
        correction_ask_user=False,
    )
    corrector = SelfCorrectingCorrector.from_settings(settings)
    try:
        assert "quota-exceeded" in {rule.id for rule in corrector.rules}
        assert corrector.options.threshold == 0.9 and corrector.options.ask_user is False
        verdict = classify_failure(
            ["tool", "sync"], 1, "error: quota exceeded, retry later", rules=corrector.rules
        )
        assert verdict.rule_id == "quota-exceeded" and verdict.category == "transient"
    finally:
        corrector.close()


def test_worker_correctors_settle_fixes_when_workflows_finish(tmp_path: Path) -> None:
    from librarian.correction.loop import loop_correctors

    correctors = loop_correctors(Settings(home=tmp_path / "home"))
    try:
        loop = correctors[0]
        assert isinstance(loop, SelfCorrectingCorrector) and loop.settle_on_finish
        alone = SelfCorrectingCorrector.from_settings(Settings(home=tmp_path / "other"))
        assert not alone.settle_on_finish  # its caller settles (and reports) what was learned
        alone.close()
    finally:
        for corrector in correctors:
            close = getattr(corrector, "close", None)
            if callable(close):
                close()
