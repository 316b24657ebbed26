"""Calibration rows (the columns of catalog/perf_calibration.csv, NVIDIA's published Megatron
Bridge benchmark rows) as planner inputs: architecture, hardware, precision and the layout run.

Read by `mbridge-launch calibrate` (the shipped rows, a user's --rows files, the ledger's measured
runs) and by benchmarks/ (fit_constants.py, accuracy.py through benchmarks/calibration_rows.py).
Conventions of the table: empty VP/EP = not applicable (VP=1, EP=1 mean the same); `fsdp` > 0 =
Megatron-FSDP; model_variant "w/o MTP" = the DeepSeek-V3 MTP layer off; "tokendrop" = MoE capacity
factor (no dropless host synchronisation). Benchmark recipes reduce gradients in bf16
(GRAD_BYTES). 61-layer models (DeepSeek-V3, Kimi K2) declare an uneven pipeline layout.

A file someone else wrote is read bounded (base/files.py); a bad field is a UserError naming the
file, the line, the column and what the column accepts; a row of a model whose architecture the
catalog lacks is skipped with the reason (the caller says so), never a traceback.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Mapping

from mbridge_launch.base.errors import UserError
from mbridge_launch.base.escape import one_line
from mbridge_launch.knowledge.hardware import Hardware, get_hardware, known_hardware
from mbridge_launch.knowledge.models import ModelArch, load_arch
from mbridge_launch.knowledge.vocabulary import PRECISIONS, normalize_precision
from mbridge_launch.planner.memory import estimate_memory
from mbridge_launch.planner.rules import Layout, check_layout, errors

CSV_NAME = "perf_calibration.csv"
# The rows are benchmark (perf) recipes, which reduce gradients in bf16
# (ddp.grad_reduce_in_fp32=false): 2-byte gradient buffers instead of the library recipes' 4.
GRAD_BYTES = 2.0
# 129 published rows take 16 kB; 4 MiB holds some 30,000 rows, far more than a fit in a minute uses
MAX_CSV_BYTES = 4 * 1024 * 1024
MAX_ROWS = 5000  # per file: more than the command can fit in its minute (about 300 rows)

# Every column of the calibration CSV. REQUIRED must be present in the header (the others may be
# left out or empty).
COLUMNS = ("release", "task", "model", "system", "num_gpus", "precision", "gbs", "mbs", "seq_length", "tp", "pp", "cp",
           "vp", "ep", "fsdp", "ga", "model_variant", "tokens_per_sec_per_gpu", "model_tflops_per_gpu")
REQUIRED = ("model", "system", "num_gpus", "precision", "gbs", "mbs", "seq_length", "tp", "pp", "cp",
            "tokens_per_sec_per_gpu")
_POSITIVE = ("num_gpus", "gbs", "mbs", "seq_length", "tp", "pp", "cp")
_OPTIONAL_POSITIVE = ("vp", "ep")
# the throughput model estimates pretraining steps (the published rows are all pretraining)
TASKS = ("pretrain",)


def csv_path() -> Path:
    """The shipped rows (package data catalog/perf_calibration.csv)."""
    from mbridge_launch.base.resources import catalog_dir

    return catalog_dir() / CSV_NAME


@dataclass(frozen=True)
class Row:
    index: int
    release: str
    model: str
    system: str
    precision: str
    arch: ModelArch
    hw: Hardware
    layout: Layout
    tokens_per_sec: float | None
    model_tflops: float | None
    mtp_layers: int | None
    token_drop: bool
    variant: str

    @property
    def label(self) -> str:
        L = self.layout
        return (f"{self.release} {self.model} {self.system} {self.precision} n={L.world} "
                f"tp{L.tp} pp{L.pp} cp{L.cp} ep{L.ep} vp{L.vp or 1} mbs{L.mbs}")

    @property
    def valid(self) -> bool:
        return not errors(check_layout(self.layout, self.arch, self.hw))


@dataclass(frozen=True)
class Skipped:
    """A row not used, and why (a message key's text, already in the user's language)."""

    where: str  # "FILE line N"
    reason: str


class _Bad(Exception):
    """One bad field: the column, the value and what the column accepts (turned into a UserError
    naming the file and line by the reader)."""

    def __init__(self, column: str, value: str, valid: str) -> None:
        super().__init__(column)
        self.column, self.value, self.valid = column, value, valid


def _digits(column: str, text: str) -> int:
    """The value of a field of ASCII digits within the rules' size limit, else 0 (refused)."""
    from mbridge_launch.planner.rules import size_limit

    if not (text.isascii() and text.isdigit()):
        return 0
    value = int(text)
    return value if value <= size_limit("world" if column == "num_gpus" else column) else 0


_SHOWN_MAX = 80  # characters of a bad field's value echoed back


def _int(record: Mapping[str, str], column: str) -> int:
    """A positive integer field."""
    value = _positive(record, column, "calibrate.rows.valid.positive", required=True)
    assert value is not None  # required: empty is refused
    return value


def _optional_int(record: Mapping[str, str], column: str) -> int | None:
    """A positive integer field that may be empty (None)."""
    return _positive(record, column, "calibrate.rows.valid.positive_or_empty", required=False)


def _positive(record: Mapping[str, str], column: str, valid_key: str, *, required: bool) -> int | None:
    text = (record.get(column) or "").strip()
    if not text and not required:
        return None
    value = _digits(column, text)
    if value <= 0:
        from mbridge_launch.base.i18n import t

        raise _Bad(column, text, t(valid_key))
    return value


def _float(record: Mapping[str, str], column: str) -> float | None:
    text = (record.get(column) or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (value > 0 and value < float("inf")):
        from mbridge_launch.base.i18n import t

        raise _Bad(column, text, t("calibrate.rows.valid.positive_number_or_empty"))
    return value


def row_of(index: int, record: Mapping[str, str]) -> Row | str:
    """The Row of one CSV record, or the reason it is skipped (a model without architecture, a
    task other than pretraining); _Bad for a field the column does not accept."""
    from mbridge_launch.base.i18n import t

    task = (record.get("task") or "pretrain").strip()
    if task not in TASKS:
        return t("calibrate.rows.skip.task", task=task, tasks=", ".join(TASKS))
    model = (record.get("model") or "").strip()
    arch = load_arch(model)
    if arch is None:
        return t("calibrate.rows.skip.model", model=model)
    system = (record.get("system") or "").strip()
    try:
        hw = get_hardware(system)
    except UserError:
        raise _Bad("system", system, ", ".join(known_hardware())) from None
    text = record.get("precision") or ""
    try:
        precision = normalize_precision(text)
    except UserError:
        raise _Bad("precision", text, ", ".join(PRECISIONS)) from None
    values = {c: _int(record, c) for c in _POSITIVE}
    vp, ep = (_optional_int(record, c) for c in _OPTIONAL_POSITIVE)
    fsdp_text = (record.get("fsdp") or "").strip()
    if fsdp_text and not (fsdp_text.isascii() and fsdp_text.isdigit() and len(fsdp_text) < 10):
        raise _Bad("fsdp", fsdp_text, t("calibrate.rows.valid.fsdp"))
    tp, pp, cp, world = values["tp"], values["pp"], values["cp"], values["num_gpus"]
    if world % (tp * pp * cp):
        raise _Bad("num_gpus", str(world), t("calibrate.rows.valid.world", grid=tp * pp * cp))
    dp = world // (tp * pp * cp)
    if values["gbs"] % (values["mbs"] * dp):
        raise _Bad("gbs", str(values["gbs"]), t("calibrate.rows.valid.gbs", unit=values["mbs"] * dp))
    layout = Layout(
        tp=tp, pp=pp, vp=vp if vp and vp > 1 else None, cp=cp, ep=ep or 1, sp=tp > 1,
        mbs=values["mbs"], gbs=values["gbs"], seq_length=values["seq_length"], world=world,
        fsdp=int(fsdp_text or 0) > 0, cp_comm_type="p2p" if cp > 1 else None,
        uneven_pp=arch.num_layers % (pp * (vp or 1)) != 0,
    )
    variant = (record.get("model_variant") or "").strip()
    return Row(
        index=index, release=(record.get("release") or "").strip(), model=model, system=system,
        precision=precision, arch=arch, hw=hw, layout=layout,
        tokens_per_sec=_float(record, "tokens_per_sec_per_gpu"), model_tflops=_float(record, "model_tflops_per_gpu"),
        mtp_layers=0 if "w/o MTP" in variant else None, token_drop="tokendrop" in variant, variant=variant,
    )


def record_of(row: Row) -> dict[str, str]:
    """The CSV-column record of a Row (row_of's inverse): what a calibration file keeps of the
    user's measured rows (planner.calibration_file)."""
    L = row.layout

    def text(value: float | None) -> str:
        return "" if value is None else f"{value:.6g}"

    return {"release": row.release, "task": "pretrain", "model": row.model, "system": row.system,
            "num_gpus": str(L.world), "precision": row.precision, "gbs": str(L.gbs), "mbs": str(L.mbs),
            "seq_length": str(L.seq_length), "tp": str(L.tp), "pp": str(L.pp), "cp": str(L.cp),
            "vp": str(L.vp or ""), "ep": str(L.ep), "fsdp": "1" if L.fsdp else "", "model_variant": row.variant,
            "tokens_per_sec_per_gpu": text(row.tokens_per_sec), "model_tflops_per_gpu": text(row.model_tflops)}


def _where(path: str, line: int) -> str:
    from mbridge_launch.base.i18n import t

    return t("calibrate.rows.where", path=path, line=line)


def rows_of_records(records: Iterable[Mapping[str, str]], where: str, first_line: int = 2, *, strict: bool = True
                    ) -> tuple[list[Row], list[Skipped]]:
    """Rows of CSV-column records (a CSV file's, the ledger's measured runs): `where` names their
    source in messages, record k is line first_line + k there. A bad field is a UserError when
    `strict` (a file the user wrote), else the record is skipped with that message (the ledger's
    runs: one odd run must not stop a calibration)."""
    rows: list[Row] = []
    skipped: list[Skipped] = []
    for i, record in enumerate(records):
        line = first_line + i
        try:
            got = row_of(i, record)
        except _Bad as bad:
            # the value echoed on one line, bounded: a cell of a user's file can be anything
            shown = bad.value if len(bad.value) <= _SHOWN_MAX else bad.value[:_SHOWN_MAX] + "..."
            error = UserError("calibrate.rows.bad_value", path=where, line=line, column=bad.column,
                              value=one_line(shown), valid=bad.valid)
            if strict:
                raise error from None
            skipped.append(Skipped(_where(where, line), error.render()))
            continue
        if isinstance(got, str):
            skipped.append(Skipped(_where(where, line), got))
        else:
            rows.append(got)
    return rows, skipped


def read_rows(path: str | Path) -> tuple[list[Row], list[Skipped]]:
    """The rows of one calibration CSV, bounded in size and row count; a missing required column
    or a bad field is a UserError naming the file (and line and column)."""
    from mbridge_launch.base.files import read_bounded_text

    where = str(path)
    text = read_bounded_text(path, MAX_CSV_BYTES, "calibration_csv")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in (reader.fieldnames or [])]
        reader.fieldnames = header
        missing = [c for c in REQUIRED if c not in header]
        if missing:
            raise UserError("calibrate.rows.missing_column", path=where, column=missing[0],
                            columns=", ".join(REQUIRED))
        records: list[dict[str, str]] = []
        for record in reader:
            if None in record:  # more fields than the header names
                raise UserError("calibrate.rows.extra_fields", path=where, line=reader.line_num, columns=len(header))
            if len(records) >= MAX_ROWS:
                raise UserError("calibrate.rows.too_many", path=where, limit=MAX_ROWS)
            records.append(record)
    except csv.Error as exc:
        raise UserError("calibrate.rows.not_csv", path=where, line=reader.line_num, reason=str(exc)) from None
    return rows_of_records(records, where)


def load_rows(path: Path | None = None) -> list[Row]:
    """The rows of a calibration CSV (default: the shipped one), the skipped ones left out."""
    return read_rows(path or csv_path())[0]


def with_fitting_recompute(row: Row) -> Layout:
    """The published layout with the cheapest recompute our memory model lets fit, from the same
    levels the search tries (none, selective, full recompute of part of each chunk, of all)."""
    from mbridge_launch.planner.recompute import RECOMPUTE_ORDER, recompute_levels
    from mbridge_launch.planner.rules import chunk_layers

    per_chunk = chunk_layers(row.arch.num_layers, row.layout)
    for recompute, layers in recompute_levels(list(RECOMPUTE_ORDER), per_chunk, partial=True):
        layout = replace(row.layout, recompute=recompute, recompute_layers=layers)
        if estimate_memory(row.arch, layout, row.hw.hbm_gb, precision=row.precision, grad_bytes=GRAD_BYTES).fits:
            return layout
    return replace(row.layout, recompute="full")
