"""How a model's decoder layers are split over the pipeline: one value object for the four ways
Megatron Core knows (TransformerConfig.__post_init__, transformer_block.get_num_layers_to_build,
pipeline_parallel_layer_layout.PipelineParallelLayerLayout):

- even: num_layers / (PP x VP) layers per virtual stage;
- first_last: `num_layers_in_first_pipeline_stage` / `num_layers_in_last_pipeline_stage` (either
  may be unset: that rank is then a middle one); the middle ranks share the rest evenly, and with
  VP every rank's count divides by VP;
- account: `account_for_embedding_in_pipeline_split` / `account_for_loss_in_pipeline_split`: the
  embedding and the loss count as one layer each, (num_layers + 1 + 1) / PP per rank, by VP;
- layout: `pipeline_model_parallel_layout`, one list of layers per virtual stage in virtual-stage
  order (stage i is chunk i // PP of rank i % PP), as a list of lists or Megatron's string form
  ("Et*4|(t*4|)*14tmL": E embedding, t decoder, m MTP, L loss, `|` between stages).

The planner chooses a split where layers do not divide PP x VP (`choose_split`), the Plan carries
it as overrides (`to_overrides`), and the rules, memory and throughput models read the layers of
each stage from it (`virtual_stages`, `rank_loads`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping, Optional

from mbridge_launch.base.hydra_values import override_text

EVEN, FIRST_LAST, ACCOUNT, LAYOUT = "even", "first_last", "account", "layout"

FIRST_KEY = "num_layers_in_first_pipeline_stage"
LAST_KEY = "num_layers_in_last_pipeline_stage"
EMBEDDING_KEY = "account_for_embedding_in_pipeline_split"
LOSS_KEY = "account_for_loss_in_pipeline_split"
LAYOUT_KEY = "pipeline_model_parallel_layout"
SPLIT_KEYS = (FIRST_KEY, LAST_KEY, EMBEDDING_KEY, LOSS_KEY, LAYOUT_KEY)

# Megatron's LayerType names in the list form and their letters in the string form
_NAMES = {"embedding": "E", "decoder": "t", "mtp": "m", "loss": "L"}
_LETTERS = frozenset(_NAMES.values())
_NULLS = ("", "null", "none", "~")


@dataclass(frozen=True)
class StageShare:
    """What one virtual pipeline stage holds."""

    rank: int  # pipeline rank
    chunk: int  # virtual chunk on that rank
    decoders: int
    embedding: bool = False
    loss: bool = False
    mtp: int = 0


@dataclass(frozen=True)
class PipelineSplit:
    kind: str = EVEN
    first: Optional[int] = None
    last: Optional[int] = None
    embedding: bool = False
    loss: bool = False
    stages: Optional[tuple[str, ...]] = None  # layout: one string of letters per virtual stage
    error: Optional[str] = None  # a layout or count that could not be read (problems() says so)
    conflict: bool = False  # more than one mechanism set: Megatron refuses the combination

    # ------------------------------------------------------------------ reading
    @classmethod
    def from_settings(cls, values: Mapping[str, Any]) -> "PipelineSplit":
        """The split of Megatron settings (recipe features, or those with overrides on top),
        keyed by the short names of SPLIT_KEYS; absent and null values are unset."""
        first, first_error = _count(values.get(FIRST_KEY))
        last, last_error = _count(values.get(LAST_KEY))
        embedding, loss = _flag(values.get(EMBEDDING_KEY)), _flag(values.get(LOSS_KEY))
        stages, layout_error = _stages(values.get(LAYOUT_KEY))
        error = layout_error or first_error or last_error
        mechanisms = [stages is not None or layout_error is not None,
                      first is not None or last is not None or bool(first_error or last_error), embedding or loss]
        conflict = sum(mechanisms) > 1
        if mechanisms[0]:
            return cls(LAYOUT, stages=stages, error=error, conflict=conflict)
        if mechanisms[1]:
            return cls(FIRST_LAST, first=first, last=last, error=error, conflict=conflict)
        if mechanisms[2]:
            return cls(ACCOUNT, embedding=embedding, loss=loss)
        return EVEN_SPLIT

    @classmethod
    def from_overrides(cls, base: "PipelineSplit | None", get: Callable[[str], Optional[str]]) -> "PipelineSplit":
        """`base` (the recipe's split) with the settings `get("model.<key>")` overrides on top
        (None: not overridden)."""
        values = (base or EVEN_SPLIT).settings()
        for key in SPLIT_KEYS:
            given = get("model." + key)
            if given is not None:
                values[key] = given
        return cls.from_settings(values)

    def settings(self) -> dict[str, Any]:
        """The five Megatron settings this split stands for."""
        return {
            FIRST_KEY: self.first, LAST_KEY: self.last, EMBEDDING_KEY: self.embedding, LOSS_KEY: self.loss,
            LAYOUT_KEY: format_layout(self.stages) if self.stages is not None else None,
        }

    def to_overrides(self, relative_to: "PipelineSplit | None" = None) -> list[tuple[str, str]]:
        """The `model.KEY=VALUE` settings that turn `relative_to` (default: the even split) into
        this split: the keys whose values differ, unset ones as null (Megatron refuses a layout
        next to first/last counts or account_for_*, so a recipe's own mechanism is switched off)."""
        mine, theirs = self.settings(), (relative_to or EVEN_SPLIT).settings()
        return [("model." + key, override_text(mine[key])) for key in SPLIT_KEYS if mine[key] != theirs[key]]

    @property
    def uneven(self) -> bool:
        return self.kind != EVEN

    # ------------------------------------------------------------------ stages
    # The search asks the same (split, layers, PP, VP, MTP) questions thousands of times (memory and
    # step time per candidate): the answers are cached, and returned as tuples so none is mutated.
    @lru_cache(maxsize=4096)  # noqa: B019 - bounded, and the keys are small frozen values
    def virtual_stages(self, num_layers: int, pp: int, vp: int = 1, mtp: int = 0) -> tuple[StageShare, ...]:
        """Every virtual stage in virtual-stage order (PP x VP of them). A split that breaks its
        rules (problems()) still gets a best-effort share, for the estimates."""
        vp = max(vp, 1)
        if self.kind == LAYOUT and self.stages and len(self.stages) % pp == 0:
            return tuple(StageShare(i % pp, i // pp, s.count("t"), "E" in s, "L" in s, s.count("m"))
                         for i, s in enumerate(self.stages))
        count = pp * vp
        if self.kind == FIRST_LAST:
            per_rank = self._first_last_ranks(num_layers, pp)
            decoders = [0] * count
            for rank, layers in enumerate(per_rank):
                for chunk, n in enumerate(_spread(layers, vp)):
                    decoders[chunk * pp + rank] = n
        elif self.kind == ACCOUNT:
            decoders = _spread(num_layers + self.embedding + self.loss, count)
            decoders[0] -= self.embedding
            decoders[-1] -= self.loss
            decoders = [max(d, 0) for d in decoders]
        else:
            decoders = _spread(num_layers, count)
        last = count - 1
        return tuple(StageShare(i % pp, i // pp, d, i == 0, i == last, mtp if i == last else 0)
                     for i, d in enumerate(decoders))

    def _first_last_ranks(self, num_layers: int, pp: int) -> list[int]:
        first = self.first if self.first is not None else None
        last = self.last if self.last is not None and pp > 1 else None
        middle = pp - (first is not None) - (last is not None)
        rest = max(num_layers - (first or 0) - (last or 0), 0)
        shares = iter(_spread(rest, middle)) if middle > 0 else iter(())
        ranks = []
        for rank in range(pp):
            if rank == 0 and first is not None:
                ranks.append(first)
            elif rank == pp - 1 and last is not None:
                ranks.append(last)
            else:
                ranks.append(next(shares, 0))
        return ranks

    @lru_cache(maxsize=4096)  # noqa: B019 - bounded, and the keys are small frozen values
    def rank_shares(self, num_layers: int, pp: int, vp: int = 1, mtp: int = 0) -> tuple[StageShare, ...]:
        """Per pipeline rank, all its virtual chunks together (chunk = -1)."""
        out = [StageShare(r, -1, 0) for r in range(pp)]
        for s in self.virtual_stages(num_layers, pp, vp, mtp):
            o = out[s.rank]
            out[s.rank] = StageShare(s.rank, -1, o.decoders + s.decoders, o.embedding or s.embedding,
                                     o.loss or s.loss, o.mtp + s.mtp)
        return tuple(out)

    @lru_cache(maxsize=4096)  # noqa: B019 - bounded, and the keys are small frozen values
    def rank_loads(self, num_layers: int, pp: int, vp: int = 1, mtp: int = 0) -> tuple[int, ...]:
        """Per rank, its layers counting the embedding, the loss and each MTP layer as one
        (the weights Megatron's account_for_* settings give them)."""
        return tuple(s.decoders + s.embedding + s.loss + s.mtp for s in self.rank_shares(num_layers, pp, vp, mtp))

    # ------------------------------------------------------------------ rules
    def problems(self, num_layers: int, pp: int, vp: Optional[int] = None, mtp: int = 0) -> list[tuple[str, dict]]:
        """What Megatron Core would refuse about this split for `num_layers` decoder layers (and
        `mtp` MTP layers) at PP x VP, as (message key, parameters); [] when it accepts it."""
        out: list[tuple[str, dict]] = []
        v = vp or 1
        if self.conflict:
            out.append(("planner.split_problem.conflict", {}))
        if self.error:
            out.append(("planner.split_problem.unreadable", {"error": self.error}))
            return out
        if self.kind == LAYOUT:
            out += _layout_problems(self.stages or (), num_layers, pp, vp, mtp)
        elif self.kind == FIRST_LAST and pp > 1:
            out += self._first_last_problems(num_layers, pp, v)
        elif self.kind == ACCOUNT and pp > 1:
            total = num_layers + self.embedding + self.loss
            if total % (pp * v):
                out.append(("planner.split_problem.account", {"total": total, "chunks": pp * v, "pp": pp, "vp": v}))
        elif self.kind == EVEN and num_layers % (pp * v):
            out.append(("planner.split_problem.even", {"layers": num_layers, "chunks": pp * v}))
        return out

    def _first_last_problems(self, num_layers: int, pp: int, vp: int) -> list[tuple[str, dict]]:
        out: list[tuple[str, dict]] = []
        counts = [c for c in (self.first, self.last) if c is not None]
        if any(c <= 0 for c in counts):
            out.append(("planner.split_problem.not_positive", {}))
            return out
        if any(c % vp for c in counts):
            out.append(("planner.split_problem.first_last_vp", {"first": override_text(self.first), "last": override_text(self.last),
                                                                "vp": vp}))
        middle = pp - len(counts)
        rest = num_layers - sum(counts)
        if rest < 0 or bool(rest) != bool(middle) or (middle and (rest % middle or (rest // middle) % vp)):
            out.append(("planner.split_problem.first_last", {"first": override_text(self.first), "last": override_text(self.last),
                                                             "rest": rest, "middle": middle, "vp": vp}))
        return out

    # ------------------------------------------------------------------ text
    def describe(self, num_layers: int, pp: int, vp: int = 1, mtp: int = 0, lang: str | None = None) -> str:
        """'first stage 3 + embedding, stages 1-14: 4, last stage 2 + MTP + loss' in words."""
        from mbridge_launch.base.i18n import t

        ranks = self.rank_shares(num_layers, pp, vp, mtp)
        parts: list[str] = []
        start = 0
        for i in range(1, len(ranks) + 1):
            if i < len(ranks) and _same_share(ranks[i], ranks[start]):
                continue
            share = ranks[start]
            what = [str(share.decoders)]
            if share.embedding:
                what.append(t("planner.split.embedding", lang=lang))
            if share.mtp:
                what.append(t("planner.split.mtp", lang=lang, count=share.mtp))
            if share.loss:
                what.append(t("planner.split.loss", lang=lang))
            layers = " + ".join(what)
            if i - 1 == start:
                parts.append(t("planner.split.rank", lang=lang, rank=start, layers=layers))
            else:
                parts.append(t("planner.split.ranks", lang=lang, start=start, end=i - 1, layers=layers))
            start = i
        detail = t("planner.split.sep", lang=lang).join(parts)
        if self.kind == LAYOUT:
            return t("planner.split.layout", lang=lang, layout=format_layout(self.stages or ()), detail=detail)
        if self.kind == FIRST_LAST:
            return t("planner.split.first_last", lang=lang, first=override_text(self.first), last=override_text(self.last), detail=detail)
        if self.kind == ACCOUNT:
            return t("planner.split.account", lang=lang, detail=detail)
        return t("planner.split.even", lang=lang, detail=detail)

    def as_json(self, num_layers: int, pp: int, vp: int = 1, mtp: int = 0) -> dict[str, Any]:
        ranks = self.rank_shares(num_layers, pp, vp, mtp)
        return {"kind": self.kind, "settings": self.settings(),
                "decoder_layers_per_rank": [r.decoders for r in ranks],
                "description": self.describe(num_layers, pp, vp, mtp)}


EVEN_SPLIT = PipelineSplit()


def _same_share(a: StageShare, b: StageShare) -> bool:
    return (a.decoders, a.embedding, a.loss, a.mtp) == (b.decoders, b.embedding, b.loss, b.mtp)


def _spread(total: int, parts: int) -> list[int]:
    """`total` over `parts` as evenly as whole numbers go, the larger shares first."""
    if parts <= 0:
        return []
    base, extra = divmod(max(total, 0), parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _count(value: Any) -> tuple[Optional[int], Optional[str]]:
    if value is None or isinstance(value, bool):
        return None, None
    if isinstance(value, int):
        return value, None
    text = str(value).strip()
    if text.lower() in _NULLS:
        return None, None
    try:
        return int(text), None
    except ValueError:
        return None, text  # not a whole number: reported (preflight's integer check names the key)


def _flag(value: Any) -> bool:
    return value is True or str(value).strip().lower() in ("true", "1", "yes")


def _stages(value: Any) -> tuple[Optional[tuple[str, ...]], Optional[str]]:
    """A layout setting as one string of letters per virtual stage, or (None, why not)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in _NULLS):
        return None, None
    if isinstance(value, str):
        try:
            return parse_layout(value), None
        except ValueError as exc:
            return None, str(exc)
    if isinstance(value, (list, tuple)) and all(isinstance(row, (list, tuple)) for row in value):
        stages = []
        for row in value:
            letters = []
            for name in row:
                letter = _NAMES.get(str(name).strip().lower())
                if letter is None:
                    return None, f"{name!r} is not a layer type (embedding, decoder, mtp, loss)"
                letters.append(letter)
            stages.append("".join(letters))
        return tuple(stages), None
    return None, f"{value!r} is neither a layout string nor a list of lists"


def parse_layout(text: str) -> tuple[str, ...]:
    """Megatron's string form (PipelineParallelLayerLayout.parse_str_to_list): commas are
    cosmetic, `(...)*n` and `x*n` repeat, `|` separates stages."""
    body = text.replace(",", "").strip()
    body = re.sub(r"\(([^)]+)\)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), body)
    body = re.sub(r"(.)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), body)
    stages = tuple(body.split("|"))
    bad = sorted({c for s in stages for c in s if c not in _LETTERS})
    if bad:
        raise ValueError(f"unknown layer letters {''.join(bad)!r} in {text!r} (E, t, m, L, '|')")
    return stages


def format_layout(stages: Iterable[str]) -> str:
    """The string form with runs written `t*4`, no parentheses or commas (a KEY=VALUE override
    with only letters, digits, `*` and `|` stays one unquoted Hydra value)."""
    out = []
    for stage in stages:
        runs = [(m.group(0)[0], len(m.group(0))) for m in re.finditer(r"(.)\1*", stage)]
        out.append("".join(c if n == 1 else f"{c}*{n}" for c, n in runs))
    return "|".join(out)


def _layout_problems(stages: tuple[str, ...], num_layers: int, pp: int, vp: Optional[int],
                     mtp: int) -> list[tuple[str, dict]]:
    """PipelineParallelLayerLayout.__init__ and validate_layer_layout."""
    count = len(stages)
    if count % pp or (vp is not None and count != pp * vp) or count == 0:
        return [("planner.split_problem.layout_stages", {"stages": count, "pp": pp, "vp": vp or 1,
                                                         "chunks": pp * (vp or 1)})]
    out: list[tuple[str, dict]] = []
    flat = "".join(stages)
    if not flat.startswith("E") or flat.count("E") != 1:
        out.append(("planner.split_problem.layout_embedding", {}))
    if not flat.endswith("L") or flat.count("L") != 1:
        out.append(("planner.split_problem.layout_loss", {}))
    if flat.count("t") != num_layers:
        out.append(("planner.split_problem.layout_decoders", {"count": flat.count("t"), "layers": num_layers}))
    if flat.count("m") != (mtp or 0):
        out.append(("planner.split_problem.layout_mtp", {"count": flat.count("m"), "mtp": mtp or 0}))
    if "m" in flat:
        chunks = count // pp
        holders = [i for i, s in enumerate(stages) if "m" in s]
        misplaced = "t" in flat[flat.index("m"):] or len(holders) != 1 or holders[0] // pp != chunks - 1
        if misplaced:
            out.append(("planner.split_problem.layout_mtp_place", {}))
    return out


# ---------------------------------------------------------------------- choosing
@lru_cache(maxsize=4096)  # the search settles every candidate's split: few distinct questions
def choose_split(num_layers: int, pp: int, vp: int = 1, mtp: int = 0, *, keep: PipelineSplit | None = None,
                 shipped: tuple[PipelineSplit, ...] = ()) -> PipelineSplit:
    """The split to run num_layers (+ mtp MTP layers) on PP x VP stages, the way Megatron Bridge's
    recipes do: `keep` (the recipe's own split) when Megatron accepts it here; the even split when
    the layers divide; a split one of the model's recipes ships for this PP x VP; the embedding
    and loss counted as a layer each when (layers + 2) divides PP x VP (Llama 3.1 405B: 128 / 64);
    else the balanced first/last-stage counts when they balance as well as an explicit pipeline
    layout can, else that layout (DeepSeek-V3 on 8 x 4: "Et|t*2|...|t*2|mL")."""
    vp = max(vp or 1, 1)
    if keep is not None and not keep.problems(num_layers, pp, vp, mtp):
        return keep
    if pp <= 1 or num_layers % (pp * vp) == 0:
        return EVEN_SPLIT
    for split in shipped:
        if split.uneven and not split.problems(num_layers, pp, vp, mtp):
            return split
    return _computed_split(num_layers, pp, vp, mtp)


@lru_cache(maxsize=512)
def _computed_split(num_layers: int, pp: int, vp: int, mtp: int) -> PipelineSplit:
    if (num_layers + 2) % (pp * vp) == 0:
        return PipelineSplit(ACCOUNT, embedding=True, loss=True)
    layout = balanced_layout(num_layers, pp, vp, mtp)
    first_last = _balanced_first_last(num_layers, pp, vp, mtp)
    if first_last is not None and max(first_last.rank_loads(num_layers, pp, vp, mtp)) <= \
            max(layout.rank_loads(num_layers, pp, vp, mtp)):
        return first_last
    return layout


def _balanced_first_last(num_layers: int, pp: int, vp: int, mtp: int) -> PipelineSplit | None:
    """First/last-stage counts (multiples of VP) with the least loaded busiest rank, the embedding
    on the first rank and the loss and MTP layers on the last counting as a layer each; None when
    no counts satisfy Megatron's rules. The loads are computed arithmetically for every pair
    (as rank_loads would), best first; the first pair problems() accepts wins (a cold search asks
    this once per pipeline size, over O(layers^2) pairs)."""
    middle = max(pp - 2, 0)
    scored = []
    for first in range(vp, num_layers + 1, vp):
        for last in range(vp, num_layers - first + 1, vp):
            rest = num_layers - first - last
            if middle == 0 and rest or middle and rest % (middle * vp):
                continue  # Megatron: the middle ranks split the rest evenly, VP chunks each
            loads = [first + 1, last + 1 + mtp] + ([rest // middle] if middle else [])
            scored.append(((max(loads), abs(loads[0] - loads[1])), first, last))
    for _, first, last in sorted(scored):
        split = PipelineSplit(FIRST_LAST, first=first, last=last)
        if not split.problems(num_layers, pp, vp, mtp):
            return split
    return None


def balanced_layout(num_layers: int, pp: int, vp: int = 1, mtp: int = 0) -> PipelineSplit:
    """An explicit layout over PP x VP virtual stages: the embedding and the loss count as a
    layer each, MTP layers too; the first stage holds the embedding, the last the MTP layers and
    the loss, the middle stages the rest as evenly as whole layers go."""
    count = pp * vp
    cap = -(-(num_layers + 2 + mtp) // count)
    first = min(max(cap - 1, 0), num_layers)
    last = min(max(cap - 1 - mtp, 0), num_layers - first)
    middle = _spread(num_layers - first - last, count - 2)
    decoders = [first] + middle + [last] if count > 1 else [num_layers]
    stages = ["t" * d for d in decoders]
    stages[0] = "E" + stages[0]
    stages[-1] = stages[-1] + "m" * mtp + "L"
    return PipelineSplit(LAYOUT, stages=tuple(stages))


@lru_cache(maxsize=128)
def shipped_splits(model: str | None) -> tuple[PipelineSplit, ...]:
    """The uneven splits the catalog's recipes of `model` ship (library recipes first), each once."""
    if not model:
        return ()
    try:
        from mbridge_launch.knowledge.catalog import load_catalog

        recipes = load_catalog().by_model(model)
    except Exception:  # noqa: BLE001 - no catalog: the planner chooses without it
        return ()
    out: list[PipelineSplit] = []
    for recipe in sorted(recipes, key=lambda r: r.kind != "library"):
        split = recipe_split(recipe)
        if split.uneven and not split.error and not split.conflict and split not in out:
            out.append(split)
    return tuple(out)


def recipe_split(recipe: Any) -> PipelineSplit:
    """The split a catalog recipe sets (its features)."""
    return PipelineSplit.from_settings(getattr(recipe, "features", None) or {})


def split_of(layout: Any) -> PipelineSplit | None:
    """The split a planner Layout declares: its `split`, else its first/last-stage counts, else
    the even split; None for `uneven_pp` without a concrete split (the throughput model then
    assumes the best whole-layer split)."""
    if getattr(layout, "split", None) is not None:
        return layout.split
    first, last = getattr(layout, "first_stage_layers", None), getattr(layout, "last_stage_layers", None)
    if first is not None or last is not None:
        return PipelineSplit(FIRST_LAST, first=first, last=last)
    return None if getattr(layout, "uneven_pp", False) else EVEN_SPLIT


def mtp_layers(arch: Any) -> int:
    """MTP layers Megatron places in the pipeline (hybrid models keep theirs in the pattern)."""
    return 0 if getattr(arch, "is_hybrid", False) else int(getattr(arch, "mtp_num_layers", 0) or 0)


_SETTLED: dict[tuple, PipelineSplit] = {}


def settle(layout: Any, arch: Any, *, keep: PipelineSplit | None = None) -> Any:
    """`layout` with its concrete split: `keep` when valid there, else choose_split's."""
    if arch is None or getattr(arch, "num_layers", None) is None:
        return replace(layout, split=keep, uneven_pp=bool(keep and keep.uneven)) if keep is not None else layout
    if keep is None and (layout.pp <= 1 or arch.num_layers % (layout.pp * layout.vp_size) == 0) \
            and layout.split in (None, EVEN_SPLIT) and not layout.uneven_pp:
        return layout  # the even split (the search's common case: no choice to make)
    key = (getattr(arch, "name", None), arch.num_layers, layout.pp, layout.vp_size, mtp_layers(arch), keep)
    split = _SETTLED.get(key)
    if split is None:  # choose_split is cached too, but hashing its `shipped` tuple each time is not free
        split = _SETTLED[key] = choose_split(arch.num_layers, layout.pp, layout.vp_size, mtp_layers(arch), keep=keep,
                                             shipped=shipped_splits(getattr(arch, "name", None)))
    if split == layout.split and split.uneven == layout.uneven_pp:
        return layout
    # a copy as rules.evolve makes it (rules imports this module): dataclasses.replace re-runs
    # __init__, which the search would pay thousands of times
    settled = object.__new__(type(layout))
    settled.__dict__.update(layout.__dict__)
    settled.__dict__.update(split=split, uneven_pp=split.uneven, first_stage_layers=None, last_stage_layers=None)
    return settled


def settle_for_recipe(layout: Any, arch: Any, recipe: PipelineSplit, recipe_pp: int, recipe_vp: int,
                      user: Mapping[str, Optional[str]]) -> Any:
    """The split of a recommended layout: the user's split settings (`user`, KEY=VALUE overrides
    by path) on top of the recipe's when the user gives any; else the recipe's own split where the
    layout keeps the recipe's PP x VP; else a fresh choice (a recipe's layout is for its own
    PP x VP: Bridge keeps it under a PP/VP override and Megatron then fails on the length)."""
    if any("model." + key in user for key in SPLIT_KEYS):
        return settle(layout, None, keep=PipelineSplit.from_overrides(recipe, lambda key: user.get(key)))
    same_grid = (layout.pp, layout.vp_size) == (recipe_pp, max(recipe_vp, 1))
    if same_grid and not recipe.uneven:
        return settle(layout, arch)
    return settle(layout, arch, keep=recipe if same_grid else None)
