"""Which correction strategy to try first: UCB1 over the rewards each strategy earned per error category.

Rewards are persisted in ``strategy_stats`` (one row per error category and strategy), so what one
run learned orders the strategies of the next. UCB1 tries every strategy once, then prefers the best
mean reward plus an exploration bonus that shrinks as a strategy is tried more often.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from sqlalchemy.orm import Session

from librarian.runtime import store


class StrategyPolicy:
    """UCB1 over correction strategies.

    Args:
        exploration: weight of the exploration bonus (``sqrt(2)`` is the classic UCB1 constant).
    """

    def __init__(self, exploration: float = math.sqrt(2)) -> None:
        self.exploration = exploration

    def scores(self, session: Session, category: str, candidates: Sequence[str]) -> dict[str, float]:
        """The UCB1 score of each candidate (``inf`` for one never tried in this category)."""
        stats = store.strategy_stats(session, category)
        total = sum(stats[name].trials for name in candidates if name in stats)
        scores: dict[str, float] = {}
        for name in candidates:
            row = stats.get(name)
            if row is None or row.trials == 0:
                scores[name] = math.inf
                continue
            mean = row.total_reward / row.trials
            scores[name] = mean + self.exploration * math.sqrt(math.log(max(total, 1)) / row.trials)
        return scores

    def choose(self, session: Session, category: str, candidates: Sequence[str]) -> list[str]:
        """``candidates`` best first; ties keep the given order (so untried ones go in registry order)."""
        scores = self.scores(session, category, candidates)
        position = {name: index for index, name in enumerate(candidates)}
        return sorted(candidates, key=lambda name: (-scores[name], position[name]))

    def record(self, session: Session, category: str, strategy: str, reward: float) -> None:
        """Add one outcome of ``strategy`` on a failure of ``category``."""
        store.add_strategy_reward(session, category, strategy, reward)
