"""NVIDIA's published benchmark rows (catalog/perf_calibration.csv) estimated with the settings of
their benchmark recipe: do they fit, as they ran?

    python benchmarks/published_row_memory.py [--all]

A row names its model, system, GPU count, precision and layout (TP/PP/CP/VP/EP, MBS, GBS, FSDP),
not the recipe's other settings. Its recipe is the 0.6.2 benchmark recipe of the same model and
task with the same grid (TP, PP, CP, EP, VP, MBS, FSDP), preferring the same system, precision and
GPU count (a row of an older release whose grid 0.6.2 ships on another system is estimated with
that recipe's settings); without a recipe of its grid, the recipe of its own system, count and
precision lends the settings that do not depend on the layout (gradient and optimizer dtypes,
fused cross entropy, FP8 weight gather, the MoE dispatcher). The row's layout is kept; recompute
and CPU offloading follow the recipe where its grid matches.
"""

from __future__ import annotations

import argparse
import collections
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mbridge_launch.knowledge.vocabulary import recipe_task  # noqa: E402
from mbridge_launch.planner.calibration_rows import Row, csv_path, load_rows  # noqa: E402
from mbridge_launch.planner.memory import HEADROOM, MemoryBreakdown, estimate_memory  # noqa: E402
from mbridge_launch.planner.nvidia_layout import recipe_layout, shipped_recipes  # noqa: E402
from mbridge_launch.planner.pipeline_split import settle  # noqa: E402
from mbridge_launch.planner.recipe_settings import applied, memory_settings  # noqa: E402
from mbridge_launch.planner.rules import Layout, evolve  # noqa: E402

# settings of a recipe that do not depend on its layout (lent to a row of another grid)
_LAYOUT_FREE = ("optimizer_bytes", "grad_bytes", "ce_fusion", "optimizer_offload_fraction", "mtp_layers")


def _grid(L: Layout) -> tuple:
    return (L.tp, L.pp, L.cp, L.ep, L.vp_size, L.mbs, bool(L.fsdp))


@dataclass(frozen=True)
class RowEstimate:
    row: Row
    recipe: Any  # the benchmark recipe whose settings were used (None: none of the model)
    same_grid: bool  # the recipe runs the row's grid (all its settings used)
    layout: Layout
    memory: MemoryBreakdown

    @property
    def fits(self) -> bool:
        return self.memory.fits


def row_recipe(row: Row, recipes: list[Any], mode: str = "pretrain") -> tuple[Any, bool]:
    """(benchmark recipe, same grid) for a published row, or (None, False)."""
    mine = [r for r in recipes if r.kind == "benchmark" and r.model == row.model and r.mode == mode
            and not r.raises_not_implemented]
    if not mine:
        return None, False
    want = _grid(row.layout)

    def key(r: Any) -> tuple:
        L = recipe_layout(r)
        return (_grid(L) != want, r.hardware != row.system, r.precision != row.precision, r.gpus != row.layout.world,
                bool(r.variant), r.name)

    best = min(mine, key=key)
    # a recipe of another system sized its settings (CPU offloading) for that system's HBM
    same = _grid(recipe_layout(best)) == want and best.hardware == row.system
    if not same and (best.hardware, best.precision, best.gpus) != (row.system, row.precision, row.layout.world):
        own = [r for r in mine if (r.hardware, r.precision, r.gpus) == (row.system, row.precision, row.layout.world)]
        if own:
            best = min(own, key=key)
    return best, same


def row_layout(row: Row, recipe: Any, same_grid: bool, goal: str = "pretrain") -> Layout:
    """The row's layout with the recipe's settings (all where it runs the row's grid); the row's own
    MTP depth (model_variant "w/o MTP") wins over the recipe's."""
    L = row.layout
    if recipe is None:
        return L
    settings = memory_settings(recipe.features, row.precision)
    if row.mtp_layers is not None:
        settings["mtp_layers"] = row.mtp_layers
    own = recipe_layout(recipe, row.arch)
    if same_grid:
        L = evolve(L, recompute=own.recompute, recompute_layers=own.recompute_layers,
                   recompute_modules=own.recompute_modules, fp8_param_gather=own.fp8_param_gather,
                   moe_dispatcher=own.moe_dispatcher, **settings)
        if own.split is not None and L.pp == own.pp and L.vp_size == own.vp_size:
            L = evolve(L, split=own.split, uneven_pp=own.uneven_pp)
        return L
    lent = {k: v for k, v in settings.items() if k in _LAYOUT_FREE}
    L = evolve(L, fp8_param_gather=own.fp8_param_gather, moe_dispatcher=own.moe_dispatcher, **lent)
    L = settle(L, row.arch) if L.pp > 1 and L.split is None else L
    return _lightest_fitting(row, L, goal)


def _lightest_fitting(row: Row, L: Layout, goal: str = "pretrain") -> Layout:
    """A row whose release's recipe the catalog does not hold: its recompute and CPU offloading are
    unknown, so the lightest the real code accepts that fits (the levels the search tries, then,
    without pipeline parallelism, CPU offloading of a growing share of the layers: Megatron
    rejects offloading with PP > 1 or with recompute)."""
    from mbridge_launch.planner.recompute import RECOMPUTE_ORDER, recompute_levels
    from mbridge_launch.planner.rules import chunk_layers

    tried = []
    if L.pp == 1:
        n = row.arch.num_layers
        tried += [evolve(L, recompute="none", recompute_layers=None, cpu_offload_layers=k)
                  for k in sorted({max(1, n * share // 8) for share in range(0, 8)})]
    tried = [evolve(L, recompute="none", recompute_layers=None)] + tried
    tried += [evolve(L, recompute=level, recompute_layers=layers) for level, layers in
              recompute_levels(list(RECOMPUTE_ORDER), chunk_layers(row.arch.num_layers, L), partial=True)]
    for trial in tried:
        if estimate_memory(row.arch, trial, row.hw.hbm_gb, precision=row.precision, goal=goal, grad_bytes=2.0).fits:
            return trial
    return tried[-1]


def estimate_rows(rows: list[Row] | None = None, goals: dict[int, str] | None = None) -> list[RowEstimate]:
    """Each row with its recipe's settings; `goals`: the task of a row (by Row.index) other than
    pretraining (the release extracts hold SFT and LoRA rows)."""
    recipes = shipped_recipes()
    out = []
    for row in rows if rows is not None else load_rows(csv_path()):
        goal = (goals or {}).get(row.index, "pretrain")
        recipe, same = row_recipe(row, recipes, recipe_task(goal))
        L = row_layout(row, recipe, same, goal)
        memory = estimate_memory(row.arch, L, row.hw.hbm_gb, precision=row.precision, goal=goal, grad_bytes=2.0)
        out.append(RowEstimate(row, recipe, same, L, memory))
    return out


# Megatron Bridge's published rows of releases 26.04-26.08 (extracted for the external throughput set,
# benchmarks/external/data/throughput_mbridge_releases.csv): rows the memory model was never fitted on
RELEASES_CSV = Path(__file__).resolve().parent / "external" / "data" / "throughput_mbridge_releases.csv"


def _field(record: dict[str, str], key: str, default: int = 1) -> int:
    text = (record.get(key) or "").strip()
    return int(text) if text else default


def release_rows(path: Path = RELEASES_CSV) -> tuple[list[Row], dict[int, str], list[str]]:
    """(rows, goal by row index, models without a known architecture) of the release extract."""
    import csv

    from mbridge_launch.base.errors import UserError
    from mbridge_launch.knowledge.hardware import get_hardware
    from mbridge_launch.knowledge.models import load_arch
    from mbridge_launch.knowledge.vocabulary import normalize_precision

    rows, goals, unknown = [], {}, []
    with path.open(encoding="utf-8") as fh:
        for i, rec in enumerate(csv.DictReader(fh)):
            try:
                arch = load_arch(rec["model"])
            except UserError:
                arch = None
            if arch is None or getattr(arch, "missing", ()):
                unknown.append(rec["model"])
                continue
            tp, pp, cp, vp = (_field(rec, k) for k in ("tp", "pp", "cp", "vp"))
            layout = Layout(tp=tp, pp=pp, cp=cp, vp=vp if vp > 1 else None, ep=_field(rec, "ep"), sp=tp > 1,
                            mbs=_field(rec, "mbs"), gbs=_field(rec, "gbs"), seq_length=_field(rec, "seq_length", 4096),
                            world=_field(rec, "gpus"), fsdp=_field(rec, "fsdp", 0) > 0,
                            cp_comm_type="p2p" if cp > 1 else None, uneven_pp=arch.num_layers % pp != 0)
            hw = get_hardware(rec["system"])
            layout = evolve(layout, gpus_per_node=hw.gpus_per_node)
            layout = settle(layout, arch) if pp > 1 else layout
            row = Row(index=10_000 + i, release=rec["release"], model=rec["model"], system=rec["system"],
                      precision=normalize_precision(rec["precision"]), arch=arch, hw=hw, layout=layout,
                      tokens_per_sec=float(rec["tokens_per_sec_per_gpu"] or 0) or None, model_tflops=None,
                      mtp_layers=None, token_drop=False, variant=rec["goal"])
            rows.append(row)
            goals[row.index] = rec["goal"]
    return rows, goals, unknown


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="print every row (default: those that do not fit)")
    ap.add_argument("--write", action="store_true", help="write the summary into benchmarks/RESULTS.md")
    args = ap.parse_args()
    results = estimate_rows()
    over = [e for e in results if not e.fits]
    for e in results:
        if args.all or not e.fits:
            m = e.memory
            print(f"{'fits' if e.fits else 'OVER'} {e.row.label}: {m.total:.1f} of {HEADROOM * e.row.hw.hbm_gb:.1f} GiB "
                  f"usable, recipe {e.recipe.name if e.recipe else '-'} ({'same grid' if e.same_grid else 'lent'})")
    rows, goals, unknown = release_rows()
    released = estimate_rows(rows, goals)
    for e in released:
        if args.all or not e.fits:
            print(f"{'fits' if e.fits else 'OVER'} {e.row.label} {goals[e.row.index]}: {e.memory.total:.1f} GiB")
    over += [e for e in released if not e.fits]
    text = summary(results) + "\n" + release_summary(released, goals, unknown)
    print(text)
    if args.write:
        from results_file import write_section

        write_section(SECTION, text)
    return 1 if over else 0


SECTION = "## Published rows with their recipes' settings (`python benchmarks/published_row_memory.py --write`)"


# the settings the memory model took from recipes in issue 34; without them (same layout and
# recompute) is what the model said before
NEW_SETTINGS = ("cpu_offload_layers", "offload_modules", "optimizer_bytes", "optimizer_offload_fraction", "grad_bytes",
                "cuda_graph_scope", "ce_fusion", "mtp_layers", "frozen_language")


def fits_without_settings(e: RowEstimate, goal: str = "pretrain") -> bool:
    bare = evolve(e.layout, **{name: None for name in NEW_SETTINGS})
    return estimate_memory(e.row.arch, bare, e.row.hw.hbm_gb, precision=e.row.precision, goal=goal,
                           grad_bytes=2.0).fits


def release_summary(results: list[RowEstimate], goals: dict[int, str], unknown: list[str]) -> str:
    """The rows of releases 26.04-26.08 (never used to fit the memory model): how many fit."""
    over = [e for e in results if not e.fits]
    before = [e for e in results if not fits_without_settings(e, goals[e.row.index])]
    same = sum(1 for e in results if e.same_grid)
    tasks = ", ".join(f"{t} {n}" for t, n in sorted(collections.Counter(goals[e.row.index] for e in results).items()))
    left_out = ", ".join(sorted(set(unknown))) or "-"
    lines = [(f"Releases 26.04-26.08 (`benchmarks/external/data/throughput_mbridge_releases.csv`, {tasks}; "
              f"{len(unknown)} rows of models without an architecture left out: {left_out}):"),
             "",
             (f"- **{len(results) - len(over)} of {len(results)} fit** with their recipe's settings ({same} with the "
              f"recipe of their own grid and system); without the settings of issue 34 (same layout and recompute) "
              f"{len(before)} did not: " + ", ".join(f"`{e.row.label}`" for e in before) + ".")]
    lines += [f"- does not fit: `{e.row.label}` ({goals[e.row.index]}): {e.memory.total:.1f} GiB" for e in over]
    return "\n".join(lines) + "\n"


def summary(results: list[RowEstimate]) -> str:
    """The RESULTS.md section: counts, the margin, and the rows closest to their limit."""
    same = [e for e in results if e.same_grid]
    over = [e for e in results if not e.fits]
    used = {}
    for e in same:
        for name in memory_settings(e.recipe.features, e.row.precision):
            used[name] = used.get(name, 0) + 1
    lent_offload = sum(1 for e in results if not e.same_grid and e.layout.cpu_offload_layers)
    lent_recompute = sum(1 for e in results if not e.same_grid and e.layout.recompute != "none")
    closest = sorted(results, key=lambda e: e.memory.total / (HEADROOM * e.row.hw.hbm_gb), reverse=True)[:8]
    lines = [SECTION, "", __doc__.split("\n\n")[2].replace("\n", " ").strip(), "",
             (f"- {len(results)} published rows (catalog/perf_calibration.csv); **{len(results) - len(over)} fit, "
              f"{len(over)} do not** (usable = {HEADROOM:.0%} of HBM); without the settings of issue 34 (same "
              f"layout and recompute) {sum(1 for e in results if not fits_without_settings(e))} did not."),
             (f"- {len(same)} estimated with every setting of the 0.6.2 benchmark recipe that runs their grid on "
              "their system; settings used among them: " + ", ".join(f"{k} ({v})" for k, v in sorted(used.items()))
              + "."),
             (f"- {len(results) - len(same)} rows of older releases whose grid 0.6.2 does not ship on their system: "
              "layout-free settings lent, recompute / CPU offloading unknown, so the lightest the real code accepts "
              f"that fits ({lent_recompute} with recompute, {lent_offload} with CPU offloading)."), "",
             "| row | recipe | settings | total GiB | usable GiB |", "|---|---|---|---|---|"]
    for e in closest:
        settings = ", ".join(f"{k}={v}" for k, v in applied(memory_settings(e.recipe.features, e.row.precision))) \
            if e.recipe is not None and e.same_grid else "lent; recompute=" + e.layout.recompute + (
                f", cpu_offload_layers={e.layout.cpu_offload_layers}" if e.layout.cpu_offload_layers else "")
        lines.append(f"| {e.row.label} | {e.recipe.name if e.recipe else '-'} | {settings} | {e.memory.total:.1f} | "
                     f"{HEADROOM * e.row.hw.hbm_gb:.1f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
