"""The access filter as a SQL condition on a JSON list of grants, for SQLite and PostgreSQL.

Rows (chunks, documents, incidents) store the grants that may read them as a JSON list
(knowledge/access.py); a caller passes when it holds any of them. PostgreSQL answers ``?|`` from a GIN
index; SQLite tests the list with ``json_each`` on the rows its other conditions already selected.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Text, cast, exists, func, literal_column, select, true, type_coerce
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import InstrumentedAttribute
from sqlalchemy.sql.elements import ColumnElement


def grants_condition(
    dialect: str, column: InstrumentedAttribute[Any], grants: Iterable[str] | None
) -> ColumnElement[bool]:
    """True for rows whose ``column`` (a JSON list of grants) shares a grant with ``grants``.

    ``None`` means the caller may see everything; an empty list lets nothing through.
    """
    if grants is None:
        return true()
    held = sorted(set(grants))
    if dialect == "postgresql":
        condition: ColumnElement[bool] = type_coerce(column, JSONB).has_any(cast(held, ARRAY(Text)))
        return condition
    each = func.json_each(column).table_valued("value")
    return exists(select(literal_column("1")).select_from(each).where(each.c.value.in_(held)))
