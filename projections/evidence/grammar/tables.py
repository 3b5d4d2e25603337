"""The numbers of a cited artifact, kept by row, and the row a sentence points at
(docs/grounding.md, 4).

A results table (CSV, a CSV block inside a log, a JSON list of records) keeps its rows: a claim
that names a row — ``at epoch 60``, ``with 64 threads``, ``batch size 512``, ``the SNP PASS
row``, ``the final epoch``, ``the best configuration`` — is checked in that row only, never
anywhere in the table. Numbers that stand alone (``key=value`` lines of a log, JSON keys) are
kept by key. Pure text work: the API reads the bytes (hash-verified) and passes them here.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import re
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from projections.evidence.grammar import units
from projections.evidence.grammar.metric_names import QUANTITY_WORDS, canon, count_scale, counted_part, metric_words
from projections.evidence.grammar.text_caches import per_text

_NUM = r"[-+]?(?:\d+\.\d+|\d+|\.\d+)(?:[eE][-+]?\d+)?"
_KEY_VALUE = re.compile(rf"([A-Za-z_][\w/.@-]*)\s*[=:]\s*({_NUM})(?![\w.])")
Cell = float | str


@dataclass
class Table:
    """One table of an artifact: its header and rows (a number as float, other cells as text)."""

    header: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    # what is derived from the rows, once they are all read (keyed by their count)
    memo: dict[tuple[object, ...], Any] = field(default_factory=dict, repr=False, compare=False)

    def column(self, key: str) -> list[Cell]:
        i = self.header.index(key)
        return [row[i] for row in self.rows]

    def varying(self) -> list[str]:
        """The columns whose cells differ between rows: what can tell one row from another."""
        memo = ("varying", len(self.rows))
        if memo not in self.memo:
            out = []
            for i, key in enumerate(self.header):
                cells = {str(row[i]) for row in self.rows}
                if len(cells) > 1:
                    out.append(key)
            self.memo[memo] = out
        return list(self.memo[memo])


@dataclass
class Place:
    """Numbers found in one piece of evidence: by the key they stand under, and by row."""

    where: str  # "results.csv", "train.log", …
    by_key: dict[str, list[float]] = field(default_factory=dict)
    tables: list[Table] = field(default_factory=list)

    def add(self, key: str, value: float) -> None:
        self.by_key.setdefault(key, []).append(value)


def numbers_in(data: bytes, where: str) -> Place:
    """The keyed numbers of an artifact: CSV tables (and CSV blocks inside logs: a header line,
    then rows), JSON keys (a list of objects is a table too) and ``key=value`` / ``key: value``."""
    place = Place(where)
    text = data.decode("utf-8", "replace")
    if text.lstrip()[:1] in "{[":
        try:
            _walk_json(json.loads(text), "", place)
            return place
        except ValueError:
            pass
    table: Table | None = None
    for row in csv.reader(io.StringIO(text)):
        cells = [c.strip() for c in row]
        if len(cells) > 1 and all(_number(c) is None for c in cells) and all(cells):
            table = Table(cells)
            place.tables.append(table)
            continue
        if table is not None and len(cells) == len(table.header):
            parsed: list[Cell] = [v if (v := _number(c)) is not None else c for c in cells]
            table.rows.append(parsed)
            for key, value in zip(table.header, parsed):
                if isinstance(value, float):
                    place.add(key, value)
            continue
        table = None if len(cells) > 1 else table
        for key, raw in _KEY_VALUE.findall(",".join(row)):
            place.add(key, float(raw))
    place.tables = [t for t in place.tables if t.rows]
    return place


def _walk_json(value: Any, key: str, place: Place) -> None:
    """Numbers under their dotted path (``val.loss``, ``results.gsm8k.exact_match``): the
    qualifier a parent key carries (``val``, ``train``) names the number as much as its own key."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            _walk_json(v, f"{key}.{k}" if key else str(k), place)
    elif isinstance(value, list):
        records = [v for v in value if isinstance(v, Mapping)]
        if records and len(records) == len(value):
            keys = list(dict.fromkeys(k for r in records for k, v in r.items() if not isinstance(v, Mapping | list)))
            if keys:
                table = Table([str(k) for k in keys])
                for r in records:
                    table.rows.append([_cell(r.get(k)) for k in keys])
                place.tables.append(table)
        for v in value:
            _walk_json(v, key, place)
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and key and math.isfinite(value):
        place.add(key, float(value))


def _cell(value: object) -> Cell:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return "" if value is None else str(value)


def _number(cell: str) -> float | None:
    try:
        value = float(cell)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# ------------------------------------------------------------------------- row pointers

_LAST = re.compile(r"\b(?:final|last|end(?:ing)?)\b", re.I)
_MOST = re.compile(r"\b(?:peak|peaks|peaked|highest|maximum|largest|biggest|widest|deepest|longest|most)\b", re.I)
_BEST = re.compile(r"\b(?:best|fastest|quickest)\b", re.I)
_LEAST = re.compile(r"\b(?:lowest|minimum|smallest|least|fewest|bottoms?|shortest|narrowest|shallowest)\b", re.I)
_WORST = re.compile(r"\b(?:worst|slowest)\b", re.I)
_ANY_EXTREME = re.compile("|".join(r.pattern for r in (_MOST, _BEST, _LEAST, _WORST)), re.I)
_DIGIT = re.compile(r"\d")
_NUMBERED_WORD = re.compile(r"(?<![\w.])(\d+)-([A-Za-z]+)\b")
_SHAPE = re.compile(r"(?<![\w.])(\d+(?:[x×]\d+)+|\d+\^[23])(?![\w.])")
# words of a column where less is better ("the best loss" is the lowest)
# nouns of what a table's rows are: the extreme one of them is a row ("the best run")
# measure words too common to single out one column ("the best replicate's time": which time?)
_GENERAL_MEASURES = frozenset({"time", "size", "rate", "mem", "throughput", "bw", "score", "value"})
_ROW_NOUNS = frozenset(
    ["run", "rep", "repetition", "replicate", "trial", "seed", "epoch", "step", "checkpoint", "configuration", "config", "row", "tile", "setting", "point", "iteration", "round", "window", "shard", "sample", "split"]
)  # fmt: skip
_LOWER_BETTER = frozenset(
    [
        "loss",
        "err",
        "latency",
        "time",
        "ppl",
        "wer",
        "cer",
        "miss",
        "residual",
        "mem",
        "size",
        "cost",
        "energy",
        "power",
        "rmse",
        "rmsd",  # a structure's root-mean-square deviation from its reference
        "fid",  # Fréchet inception distance
        "kid",
        "nll",
        "bpd",
        "mae",
        "mse",
        "crp",
    ]
)


def lower_is_better(metric: str) -> bool:
    """A metric of which less is better (a loss, an error, a time): "the best" is its lowest,
    "worse" its rise."""
    return not _LOWER_BETTER.isdisjoint(metric_words(metric))


# words of a column a row is told apart by (epoch 60, 64 threads, batch 512, seed 2)
_KEY_WORDS = frozenset(
    [
        "epoch",
        "step",
        "iter",
        "thread",
        "node",
        "rank",
        "batch",
        "seed",
        "gpu",
        "shard",
        "beam",
        "n",
        "m",
        "k",
        "tile",
        "rep",
        "run",
        "repetition",
        "workload",
        "client",
        "worker",
        "layer",
        "shot",
        "fewshot",
        "num",
        "trial",
        "config",
        "configuration",
        "variant",
        "size",
        "nstlist",
        "split",
        "set",
        "type",
        "filter",
    ]
)


@dataclass(frozen=True)
class Pointer:
    """How a sentence picks rows: key cells it names (column → the cells named), the last row,
    or an extreme row of the checked column (``max``, ``min``, or ``best``)."""

    keys: tuple[tuple[str, tuple[Cell, ...]], ...] = ()
    last: bool = False
    extreme: str | None = None
    extreme_of: str | None = None  # the column the extreme word names ("the lowest replicate SNP F1"), if any

    def __bool__(self) -> bool:
        return bool(self.keys or self.last or self.extreme)

    def merged(self, clause: Pointer) -> Pointer:
        """This sentence's pointer with one number's clause's over it: the clause's cells win
        for the columns it names, a column either names ambiguously (``SNP and INDEL``) is
        dropped, and a clause that says ``last`` or ``best`` keeps only the sentence's text cells; the
        sentence's ``last`` or ``worst`` holds for a clause that names no row of its own."""
        mine = {k: c for k, c in self.keys if len(c) == 1}
        if clause.last or clause.extreme:
            mine = {k: c for k, c in mine.items() if all(isinstance(x, str) for x in c)}
        for k, c in clause.keys:
            if len(c) == 1:
                mine[k] = c
            else:
                mine.pop(k, None)
        last = clause.last or (self.last and not clause.keys and not clause.extreme)
        inherit = not clause.extreme and not clause.keys and not clause.last
        extreme = clause.extreme or (self.extreme if inherit else None)
        return Pointer(tuple(mine.items()), last, extreme, clause.extreme_of or (self.extreme_of if inherit else None))

    def with_key(self, column: str, cell: Cell) -> Pointer:
        return Pointer(
            tuple((k, c) for k, c in self.keys if k != column) + ((column, (cell,)),),
            self.last,
            self.extreme,
            self.extreme_of,
        )


def is_key_column(table: Table, column: str) -> bool:
    memo = ("key", column, len(table.rows))
    if memo not in table.memo:
        table.memo[memo] = _is_key_column(table, column)
    return bool(table.memo[memo])


def _is_key_column(table: Table, column: str) -> bool:
    """A column a row is told apart by: text (``workload``, ``Type``), or named like one
    (``epoch``, ``threads``, ``batch``, ``seed``), or the table's first column when it holds
    whole numbers."""
    cells = table.column(column)
    if all(isinstance(c, str) for c in cells):
        return True
    if is_index_column(table, column):
        return True  # lead_day 1…10, step 500, 1000, …: what the rows are, whatever their unit
    if set(metric_words(column)) & QUANTITY_WORDS:
        return False  # n_err_test_clean, epoch_time_s, gpu_mem_GB: a measure, whatever it is counted per
    if _between_text_keys(table, column):
        return True  # crystal, ecutwfc_Ry, kspacing_inv_A, kgrid, dE…: the settings the text keys enclose
    named = _key_words_of(column)
    if named and units.of_metric(column) is None:  # index_size_GB is a measure; batch_size a key
        return True
    numbered = [c for c in cells if not (isinstance(c, str) and c.strip().lower() in _SUMMARY_ROWS)]
    whole = bool(numbered) and all(isinstance(c, float) and c == int(c) for c in numbered)  # 1..10, then "all"
    plural = column.islower() and column.endswith("s") and column.isalpha()  # stages, replicates, shots
    first = table.header.index(column) == 0
    swept = first and len(numbered) > 1 and len(set(numbered)) == len(numbered)  # lm_weight 0.0, 0.1, …: a sweep
    return (whole and (first or plural)) or swept


def _between_text_keys(table: Table, column: str) -> bool:
    """A numeric column between two text columns of a table whose measures follow the second
    (``crystal, ecutwfc_Ry, kspacing_inv_A, kgrid, dE_latt…``): a setting of the row, not a measure."""
    texts = [j for j, h in enumerate(table.header) if all(isinstance(c, str) for c in table.column(h))]
    j = table.header.index(column)
    return any(a < j < b < len(table.header) - 1 for a, b in zip(texts, texts[1:]))


def _key_words_of(column: str) -> set[str]:
    """The key words a column's name holds before any ``per`` (``particles_per_gpu_M`` counts
    particles, it is no GPU key); a letter (``M``, ``n``) only when it is the whole name:
    ``z500_rmse_m`` is a measure kept in metres, ``M`` a GEMM dimension."""
    head = counted_part(column)
    words = set(metric_words(head)) | set(canon(head))
    alone = len(words) == 1
    return {w for w in words & _KEY_WORDS if len(w) > 1 or alone}


def is_index_column(table: Table, column: str) -> bool:
    """The table's first column, whole numbers rising row by row (``lead_day`` 1…10, ``step``
    500, 1000, …): the rows' index, whatever its unit."""
    return table.header.index(column) == 0 and _counting(table.column(column))


def _counting(cells: list[Cell]) -> bool:
    """Whole numbers that rise row by row (more than two of them)."""
    numbers = [c for c in cells if isinstance(c, float)]
    return (
        len(numbers) == len(cells) > 2
        and all(c == int(c) for c in numbers)
        and all(a < b for a, b in zip(numbers, numbers[1:]))
    )


def pointer(
    table: Table, text: str, numbers: Iterable[tuple[float, tuple[str, ...]]], context: str | None = None
) -> Pointer:
    """The rows of ``table`` a piece of text points at: a key column named in it with one of
    its cells beside it (``epoch 60``, ``64 threads``, ``batch size 512``, ``workload A``), a
    text cell named alone (``SNP``, ``PASS``, ``indels``), ``final``/``last`` (of an epoch, step,
    iteration, checkpoint or row), or ``best``/``peak``/``lowest`` when the text or its
    ``context`` (the sentence) names what the rows are (``the best run``, ``the slowest of the
    repetitions … the fastest``). ``numbers``: the text's numbers, each with the words beside it."""
    keys: list[tuple[str, tuple[Cell, ...]]] = []
    low = text.lower()
    for key, words, texts, lowered, values, flags in _keys_of(table):
        named: list[Cell] = [c for c, lc in zip(texts, lowered) if lc in low and _names_text_cell(text, low, c, words)]
        if not named and texts:
            named = _cells_by_part(text, texts)
        if not named and texts:  # "Communication takes 1.26 s" of a phase cell "comm": a synonym of the cell
            said = _said(text)
            synonyms: list[Cell] = [c for c in texts if len(c) >= 3 and c.isalpha() and set(canon(c)) <= said]
            named = synonyms if len(synonyms) == 1 else []
        if not named and (flags or 0.0 in values):
            flag = _flag_said(text, key)  # "without GPU-direct communication": gpu_direct_comm=0
            if flag is not None and (flags or flag == 0.0):  # "without re-ranking": rerank_depth=0
                named = [flag]
        if not named:
            scale = count_scale(key)  # frames_M: "at 5M frames" is the row 5
            for value, near in numbers:
                if words & set(near):
                    named += [
                        v for v in values if min(abs(value - v), abs(value - v * scale)) <= 1e-9 * max(1.0, abs(v))
                    ]
        if named:
            keys.append((key, tuple(dict.fromkeys(named))))
    keyed = {k for k, _ in keys}
    digits, lasts, extremes = _marks(text)
    for m in _NUMBERED_WORD.finditer(text) if digits else ():  # "the 4-stage variant": stages=4
        value, word = float(m.group(1)), canon(m.group(2))[0]
        for key in table.varying():
            names = key not in keyed and is_key_column(table, key) and word in set(metric_words(key)) | set(canon(key))
            if names and value in table.column(key):
                keys.append((key, (value,)))
                keyed.add(key)
    for shape in _SHAPE.finditer(text) if digits else ():
        written = shape.group(1)
        if "^" in written:  # 4096^3: M = N = K = 4096
            side, power = written.split("^")
            cells = [float(side)] * int(power)
        else:
            cells = [float(c) for c in re.split(r"[x×]", written)]
        found = _shape_columns(table, cells)
        if found and not set(found) & keyed:
            keys += [(column, (cell,)) for column, cell in zip(found, cells)]
    last = bool(lasts) and bool(_said(text) & {"epoch", "step", "iter", "checkpoint", "row", "round", "eval"})
    for m in lasts:  # "in its final segment": the last row of a table keyed by segment
        after = [w for word in re.findall(r"[A-Za-z][\w-]*", text[m.end() : m.end() + 30])[:2] for w in canon(word)]
        last = last or bool(set(after) & _row_words(table))
    extreme = of = None
    if not extremes:
        return Pointer(tuple(keys), last, extreme)
    row_words = _row_words(table)
    around = _around(context or text)
    keyed = {k for k, _ in keys}
    for regex, way in ((_MOST, "max"), (_BEST, "best"), (_LEAST, "min"), (_WORST, "worst")):
        for m in regex.finditer(text):  # "the best run", "the slowest of the three repetitions", not "the best kernel"
            after = [w for word in re.findall(r"[A-Za-z][\w-]*", text[m.end() : m.end() + 40])[:4] for w in canon(word)]
            column = _extreme_key(table, after[:2], keyed) if way in ("max", "min") else None
            if column is not None:  # "at the largest ef_search": the row of that key's largest cell
                cells = [c for c in table.column(column) if isinstance(c, float)]
                keys.append((column, ((max if way == "max" else min)(cells),)))
                keyed.add(column)
            elif extreme is None and (set(after) & row_words or (context is not None and around & _ROW_NOUNS)):
                extreme, of = way, _extreme_column(table, set(after) - row_words)
    return Pointer(tuple(keys), last, extreme, of)


@per_text
def _marks(text: str) -> tuple[bool, tuple[re.Match[str], ...], bool]:
    """What a pointer's text holds whatever the table: a digit, its ``final``/``last`` words, an
    extreme word (``best``, ``lowest``); once per text, as one text is read against each table."""
    return _DIGIT.search(text) is not None, tuple(_LAST.finditer(text)), _ANY_EXTREME.search(text) is not None


@per_text
def _said(text: str) -> frozenset[str]:
    """The canonical words of a text, identifiers whole (``MRR@10``, ``n1a-lm``)."""
    return frozenset(w for m in re.finditer(r"[A-Za-z][\w@-]*", text) for w in canon(m.group()))


@per_text
def _around(text: str) -> frozenset[str]:
    return frozenset(w for word in re.findall(r"[A-Za-z][\w-]*", text) for w in canon(word))


def _row_words(table: Table) -> frozenset[str]:
    """What a table's rows are called: a row noun, or a word of a key column's name."""
    memo = ("row_words", len(table.rows))
    if memo not in table.memo:
        keyed = {w for key in table.header if is_key_column(table, key) for w in metric_words(key)}
        table.memo[memo] = _ROW_NOUNS | keyed
    return frozenset(table.memo[memo])


def _extreme_column(table: Table, words: set[str]) -> str | None:
    """The measured column the words after an extreme word name best (``the lowest replicate SNP
    F1``: snp_f1, not snp_fp), whose extreme row the sentence means for every column; None when
    they name none, or several alike."""
    overlap = {
        c: len(words & (set(metric_words(c)) - _GENERAL_MEASURES))
        for c in table.varying()
        if not is_key_column(table, c)
    }
    best = max(overlap.values(), default=0)
    named = [c for c, n in overlap.items() if n == best]
    return named[0] if best and len(named) == 1 else None


def _extreme_key(table: Table, words: list[str], keyed: set[str]) -> str | None:
    """The numeric key column the words after ``largest``/``smallest`` name (``the largest
    ef_search``), or None; never what the rows are (``the lowest replicate`` is the row whose
    value is lowest)."""
    for column in table.varying():
        if column in keyed or not is_key_column(table, column):
            continue
        if (set(metric_words(column)) | set(canon(column))) & _ROW_NOUNS:
            continue
        if not any(isinstance(c, float) for c in table.column(column)):
            continue
        if set(words) & ((set(metric_words(column)) | set(canon(column))) - {"time", "size"}):
            return column
    return None


def shapes(text: str) -> list[list[float]]:
    """The shapes a text writes, in order (``64x64x8``, ``4096^3``)."""
    out = []
    for shape in re.finditer(r"(?<![\w.])(\d+(?:[x×]\d+)+|\d+\^[23])(?![\w.])", text):
        written = shape.group(1)
        if "^" in written:
            side, power = written.split("^")
            out.append([float(side)] * int(power))
        else:
            out.append([float(c) for c in re.split(r"[x×]", written)])
    return out


def shape_keys(table: Table, cells: list[float]) -> tuple[tuple[str, tuple[Cell, ...]], ...]:
    """The key cells of the row a shape names, or none."""
    found = _shape_columns(table, cells)
    return tuple((column, (cell,)) for column, cell in zip(found, cells)) if found else ()


def _shape_columns(table: Table, cells: list[float]) -> list[str] | None:
    """Consecutive numeric key columns a row of which holds the cells of a shape, in order
    (``64x8x64``: TI, TJ, TK; ``4096^3``: M, N, K)."""
    n = len(cells)
    for start in range(len(table.header) - n + 1):
        columns = table.header[start : start + n]
        if not all(all(isinstance(c, float) and c == int(c) for c in table.column(h)) for h in columns):
            continue
        idx = [table.header.index(c) for c in columns]
        if any([row[k] for k in idx] == cells for row in table.rows):
            return columns
    return None


def _keys_of(
    table: Table,
) -> list[tuple[str, frozenset[str], tuple[str, ...], tuple[str, ...], tuple[float, ...], bool]]:
    """The table's key columns, once: each with its words, its text cells (as written and
    lowercase), its numbers, and whether it is a 0/1 flag."""
    memo = ("keys", len(table.rows))
    if memo not in table.memo:
        out = []
        for key in table.varying():
            if not is_key_column(table, key):
                continue
            cells = table.column(key)
            words = frozenset((set(metric_words(key)) or set(canon(key))) - {"time", "size"})
            texts = tuple(dict.fromkeys(x for x in cells if isinstance(x, str) and x))
            values = tuple(c for c in cells if isinstance(c, float))
            lowered = tuple(x.lower() for x in texts)
            out.append((key, words, texts, lowered, values, set(values) == {0.0, 1.0}))
        table.memo[memo] = out
    return list(table.memo[memo])


def _cells_by_part(text: str, cells: tuple[str, ...]) -> list[Cell]:
    """Text cells named by a distinctive part (``HaplotypeCaller`` of ``gatk_haplotypecaller``,
    ``BWA-MEM2 alignment`` of ``bwa_mem2_align``): the one cell whose parts of four letters or
    more the text holds most of (none when two tie)."""
    index = _part_index(cells)
    scores: dict[str, int] = {}
    for part in _written_parts(text) & index.keys():
        for cell in index[part]:
            scores[cell] = scores.get(cell, 0) + 1
    best = max(scores.values(), default=0)
    winners: list[Cell] = [c for c, n in scores.items() if n == best]
    return winners if best and len(winners) == 1 else []


@functools.lru_cache(maxsize=1024)
def _part_index(cells: tuple[str, ...]) -> dict[str, list[str]]:
    """Each distinctive part of a column's text cells → the cells holding it (once per time)."""
    index: dict[str, list[str]] = {}
    for cell in dict.fromkeys(cells):
        for part in _cell_parts(cell):
            index.setdefault(part, []).append(cell)
    return index


@per_text
def _written_parts(text: str) -> frozenset[str]:
    """A text's words, lower case, and their stems without -ing and -ment."""
    written = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9]*", text)}
    written |= {w[: len(w) - 3] for w in written if w.endswith("ing")} | {
        w[: len(w) - 4] for w in written if w.endswith("ment")
    }
    return frozenset(written)


@functools.lru_cache(maxsize=8192)
def _cell_parts(cell: str) -> tuple[str, ...]:
    """A text cell's distinctive parts: of four letters or more, or with a digit."""
    return tuple(p for p in re.split(r"[^A-Za-z0-9]+", cell.lower()) if len(p) >= 4 or re.search(r"\d", p))


@functools.lru_cache(maxsize=8192)
def _cell_pattern(cell: str) -> re.Pattern[str]:
    flags = re.I if len(cell) >= 4 or not cell.isupper() else 0
    return re.compile(rf"(?<![\w-]){re.escape(cell)}s?(?!\w)", flags)


def _names_text_cell(text: str, low: str, cell: str, column_words: AbstractSet[str]) -> bool:
    """A text cell is named by the text: alone when it is long or an identifier (``SNP`` or
    ``SNPs``, ``INDEL`` or ``indels``, ``PASS``, ``leveled``), after its column's name when it is
    short (``workload A``)."""
    if cell.lower() not in low:
        return False  # every way of naming it writes it
    if len(cell) >= 3:
        return _cell_pattern(cell).search(text) is not None
    if cell.isupper() and len(cell) == 2 and re.search(rf"(?<![\w-]){re.escape(cell)}(?![\w-])", text):
        return True
    for word in column_words:
        if re.search(rf"\b{re.escape(word)}s?\s*[=:]?\s*{re.escape(cell)}(?![\w-])", low, re.I):
            return True
    return False


_WITHOUT = re.compile(r"\b(?:without|no|w/o|disabled?|disabling|turning off|minus)\s+(?:the\s+|any\s+)?$", re.I)
_WITH = re.compile(r"\b(?:with|w/|enabled?|enabling|using|plus)\s+(?:the\s+)?$", re.I)


@functools.lru_cache(maxsize=4096)
def _flag_pattern(column: str) -> re.Pattern[str] | None:
    """The words of a 0/1 column's name as a sentence writes them (``GPU-direct communication``)."""
    parts = [
        p
        for p in re.split(r"[_\s-]+", column.lower())
        if p and p not in ("use", "enable", "enabled", "is", "has", "depth", "size", "num", "n", "count")
    ]
    if not parts:
        return None
    return re.compile(r"\b" + r"[\s_-]+".join(re.escape(p) + r"[a-z]*" for p in parts) + r"\b", re.I)


def _flag_said(text: str, column: str) -> float | None:
    """The cell of a 0/1 column (``gpu_direct_comm``, ``use_lm``) a sentence names by ``with``
    or ``without`` before the words of its name, or None."""
    pattern = _flag_pattern(column)
    if pattern is None:
        return None
    m = pattern.search(text)
    if m is None:
        text = re.sub(r"(?<=[A-Za-z])-(?=[a-z])", "", text)  # "re-ranking" names rerank_depth
        m = pattern.search(text)
    if m is None:
        return None
    before = text[max(0, m.start() - 30) : m.start()]
    if _WITHOUT.search(before):
        return 0.0
    if _WITH.search(before):
        return 1.0
    return None


_SUMMARY_ROWS = frozenset(
    {
        "all",
        "total",
        "sum",
        "mean",
        "avg",
        "average",
        "median",
        "overall",
        "summary",
        "std",
        "sd",
        "stdev",
        "stddev",
        "sem",
        "var",
        "min",
        "max",
        "ci95",
        "ci",
    }
)


def pointed_rows(table: Table, ptr: Pointer, column: str | None = None) -> list[list[Cell]]:
    """The rows a pointer picks (all rows when it picks none of this table's)."""
    rows = table.rows
    for key, cells in ptr.keys:
        if key in table.header:
            i = table.header.index(key)
            rows = [r for r in rows if r[i] in cells]
    if ptr.last or ptr.extreme:  # the final epoch, the best tile: never a summary row (all, mean, total)
        rows = [r for r in rows if not any(isinstance(c, str) and c.strip().lower() in _SUMMARY_ROWS for c in r)]
    if ptr.last and rows:
        rows = [rows[-1]]
    if ptr.extreme_of is not None and ptr.extreme_of in table.header:
        column = ptr.extreme_of  # "the lowest replicate SNP F1 …, with 3,522 false positives": that row's
    if ptr.extreme and column in table.header and rows:
        i = table.header.index(column)
        numeric = [r for r in rows if isinstance(r[i], float)]
        if numeric:
            way = ptr.extreme
            if way in ("best", "worst"):  # the best loss is the lowest, the worst the highest
                lower = lower_is_better(column)
                way = "min" if lower == (way == "best") else "max"
            pick = max if way == "max" else min
            best = pick(float(r[i]) for r in numeric)
            rows = [r for r in numeric if r[i] == best]
    return rows
