"""The quantity a number of a claim is read as: its fields (value, the precision it was written
to, unit, the name or count noun beside it, qualifier, sign, direction, links), how one is made
and changed, and the words that mark one approximate. Reading a text's quantities is
:mod:`projections.evidence.grammar.quantities`; linking them to each other (ranges, lists,
``respectively``, shares, changes and their direction) is
:mod:`projections.evidence.grammar.quantity_links`.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any

APPROX = (
    "about",
    "approximately",
    "approx.",
    "approx",
    "around",
    "roughly",
    "nearly",
    "almost",
    "some",
    "circa",
    "ca.",
)


@dataclass(frozen=True)
class Quantity:
    """One number of a claim, as read (see the module docstring)."""

    written: str  # the digits as written: "828.7", "1,234.5", "18.2"
    text: str  # the quantity as read: "828.7 ms"
    start: int
    end: int
    value: float  # signed, times its suffix
    tolerance: float  # half a unit of the last digit written, times the suffix
    unit: str | None = None  # a pint unit, "%" or "x"
    name: str | None = None  # a metric name written beside it (as written)
    explicit_name: bool = False  # written as name=value, name: value or a snake_case word
    noun: str | None = None  # a count noun ("thread")
    per: str | None = None  # what the count is per ("2 sweeps per k-tile": "k-tile")
    qualifier: str = "exact"  # exact, approx, <, <=, >, >=
    signed: bool = False
    spread: bool = False  # "± 0.13"
    direction: str | None = None  # up, down, share (a change or a ratio)
    speed: bool = False  # the direction is about speed (faster, slower, speedup)
    range_with: int | None = None  # the index of the other end of a range
    range_first: bool = False
    from_range: bool = False  # "from A to B": A may be an ancestor's
    of_quantity: int | None = None  # "N % of Q": Q's index
    base_of_share: bool = False  # Q itself
    difference: bool = False  # "+5.95 GFlops/s over node_A", "0.5 s faster than node_A": a signed difference
    judged: bool = False  # its direction is a judgement ("worse", "improves"): a rise of a loss is worse
    closeness: bool = False  # "within 2 % of node_A": |own / base - 1| at most the figure
    change_kind: str | None = None  # "absolute" or "relative", when the sentence says which
    list_pos: int | None = None  # its place in a list of numbers ("64, 128 and 256": 0, 1, 2)
    list_len: int = 0
    respectively: bool = False  # a list paired item by item with another ("... respectively")

    @property
    def approximate(self) -> bool:
        return self.qualifier == "approx"

    @property
    def bound(self) -> bool:
        return self.qualifier in ("<", "<=", ">", ">=")

    @property
    def change(self) -> bool:
        return self.unit in ("%", "x", "pp")


_DEFAULTS = {f.name: f.default for f in fields(Quantity) if f.default is not MISSING}


def new_quantity(written: str, text: str, start: int, end: int, value: float, tol: float, **rest: Any) -> Quantity:
    """``Quantity(...)`` without a frozen dataclass's field-by-field ``__init__`` (every number
    of every claim is made here); ``rest`` are the other fields, the defaults for the others."""
    new = object.__new__(Quantity)
    new.__dict__.update(_DEFAULTS, written=written, text=text, start=start, end=end, value=value, tolerance=tol)
    new.__dict__.update(rest)
    return new


def replace(q: Quantity, **changes: Any) -> Quantity:
    """``dataclasses.replace`` for a quantity, without its walk over the fields on every call (a
    claim's check makes thousands); the fields are all plain values, none computed."""
    unknown = changes.keys() - q.__dict__.keys()
    if unknown:
        raise TypeError(f"Quantity has no field {sorted(unknown)[0]!r}")
    new = object.__new__(Quantity)
    new.__dict__.update(q.__dict__)
    new.__dict__.update(changes)
    return new
