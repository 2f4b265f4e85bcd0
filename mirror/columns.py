"""Rows of text cells printed in columns, as ``kafka-consumer-groups.sh`` prints its tables."""

from __future__ import annotations

from typing import Sequence

__all__ = ["columns"]


def columns(rows: Sequence[Sequence[str]]) -> str:
    """``rows`` (the header first) left-aligned in columns two spaces apart, no trailing blanks."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows)
