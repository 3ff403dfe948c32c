"""Strategy statistics counted by the database: concurrent trials neither collide nor get lost."""

from __future__ import annotations

import threading
from pathlib import Path

from librarian.runtime import store
from librarian.runtime.models import StrategyStat
from librarian.storage.database import open_database


def test_concurrent_first_trials_on_postgresql_count_both(postgres_url: str) -> None:
    engine, sessions = open_database(postgres_url)
    pairs = [(f"category{round_}", "mkdir") for round_ in range(5)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def record(reward: float) -> None:
        try:
            for category, strategy in pairs:
                barrier.wait(5)  # both threads insert the same new pair at the same moment
                with sessions.begin() as session:
                    store.add_strategy_reward(session, category, strategy, reward)
            for _ in range(20):  # then increments of an existing row, racing too
                with sessions.begin() as session:
                    store.add_strategy_reward(session, "category0", "mkdir", reward)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=record, args=(reward,)) for reward in (1.0, -0.5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    try:
        assert not errors, errors
        with sessions() as session:
            rows = {row.error_category: (row.trials, row.total_reward) for row in session.query(StrategyStat)}
        # Rewards of 1.0 and -0.5 are exact in binary, so the sums can be compared exactly.
        assert rows == {"category0": (42, 10.5), **{category: (2, 0.5) for category, _ in pairs[1:]}}
    finally:
        engine.dispose()


def test_a_row_loaded_earlier_in_the_session_shows_the_new_counts(tmp_path: Path) -> None:
    engine, sessions = open_database(f"sqlite:///{tmp_path / 'runtime.db'}")
    with sessions.begin() as session:
        store.add_strategy_reward(session, "missing_path", "mkdir", 1.0)
        loaded = store.strategy_stats(session, "missing_path")["mkdir"]
        assert (loaded.trials, loaded.total_reward) == (1, 1.0)
        store.add_strategy_reward(session, "missing_path", "mkdir", -0.25)
        assert (loaded.trials, loaded.total_reward) == (2, 0.75)
    engine.dispose()
