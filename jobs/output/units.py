"""How the renderers write numbers: byte sizes, money, counts and durations.

JSON keeps the exact figures; these are for people reading a terminal, an HTML page or a CSV.
"""

from __future__ import annotations

from decimal import Decimal


def size(value: int | None) -> str:
    """``0 B``, ``812 B``, ``1.5 KiB`` ... ``3.2 PiB`` (binary units); ``?`` when unknown."""
    if value is None:
        return "?"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if amount < 1024 or unit == "PiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    raise AssertionError("unreachable")


def money(value: float | None, currency: str = "USD", *, exact: bool = True) -> str:
    """``$1,234.56``. An amount under a cent is written in plain decimals with two significant
    digits (``$0.0000026``), never in exponent form; with ``exact=False`` (the console) it reads
    ``< $0.01``, the exact figure being in the JSON."""
    if value is None:
        return "?"
    symbol = "$" if currency == "USD" else f"{currency} "
    if value == 0 or abs(value) >= 0.01:
        return f"{'-' if value < 0 else ''}{symbol}{abs(value):,.2f}"
    if not exact:
        return f"< {symbol}0.01" if value > 0 else f"> -{symbol}0.01"
    digits = f"{abs(value):.2g}"
    return f"{'-' if value < 0 else ''}{symbol}{Decimal(digits):f}"


def count(value: int | None) -> str:
    """``1,234`` (``?`` when unknown)."""
    return f"{value:,}" if value is not None else "?"


def hours(value: float | None) -> str:
    """``168h``, ``1.5h``, ``0h``; under an hour in seconds (``90s``)."""
    if value is None:
        return "?"
    return f"{value:g}h" if value >= 1 or value == 0 else f"{value * 3600:.0f}s"
