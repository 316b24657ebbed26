"""The static catalog against real ConfigContainers: one comparison for the test tier and `catalog verify`.

Input: the JSON lines of real_build.py. Two comparisons per recipe that built:

- `recipe`: every field the catalog stores and the ConfigContainer holds (layout, SP, batch sizes,
  model and dataset sequence lengths, train_iters, precision, dataset record, PEFT scheme, HF id,
  features, env vars, whether the recipe raises NotImplementedError), read right after the recipe
  function returned: what the static reading describes.
- `validated`: after `runtime_config_update`, the fields the project reads as the EFFECTIVE value
  (the planner's layout, batch sizes, precision, dataset, distributed optimizer, FSDP, recompute),
  with the catalog value resolved as its readers resolve it (an unset ETP, SP at TP=1, the
  distributed optimizer's two switches).

`NOT_COMPARED` names each stored field that neither comparison covers, with the reason;
`uncompared_fields` lists any other stored field, so that a new catalog field fails the test until
it is compared or given a reason. Differences that are right (a run-time decision the static
catalog cannot model) are listed with their reason in catalog/reviewed-differences-<release>.yaml.
Every recipe the real validation rejects is matched with the catalog finding that predicts its
error (`PREDICTS`). Runs in any Python 3.10-3.12 (no torch).
"""

from __future__ import annotations

import collections
import fnmatch
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterable, Iterator

ANY_VALUE = "*"

LAYOUT = (
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
    "context_parallel_size", "expert_model_parallel_size", "expert_tensor_parallel_size", "sequence_parallel",
    "micro_batch_size", "global_batch_size", "seq_length", "dataset_seq_length", "train_iters",
)
TOP_FIELDS = (*LAYOUT, "peft_scheme", "hf_model_id")
SECTIONS = ("dataset", "features", "env_vars")
# top-level stored fields the `recipe` comparison covers (sections: every key inside them)
COMPARED = frozenset({*TOP_FIELDS, *SECTIONS, "raises_not_implemented"})
# stored fields the comparisons do not cover, and why
NOT_COMPARED = {
    "name": "the key of the comparison (the function the builder calls)",
    "kind": "the key of the comparison (library or benchmark)",
    "module": "where the builder looks the function up (a wrong module fails the build: not checkable)",
    "aliases": "names, not ConfigContainer fields (a legacy alias is its own function; the builder builds canonical names)",
    "family": "parsed from the module path (names.py), not a ConfigContainer field",
    "model": "parsed from the recipe name (names.py), not a ConfigContainer field",
    "mode": "parsed from the recipe name (names.py), not a ConfigContainer field",
    "hardware": "parsed from the recipe name; the builder presents that GPU (fake_gpu.py), so equal by construction",
    "gpus": "parsed from the recipe name; the builder sets WORLD_SIZE to it, so equal by construction",
    "precision": "parsed from the recipe name; the real precision is compared as features.precision_recipe/fp8/fp4",
    "variant": "parsed from the recipe name (names.py), not a ConfigContainer field",
    "findings": "findings conformance (test_findings_conformance.py)",
    "unresolved": "which fields the static reading could not resolve (their values are null, compared above)",
}


@dataclass(frozen=True)
class Difference:
    name: str
    kind: str
    stage: str  # "recipe" (as the function returned it) or "validated" (after runtime_config_update)
    field: str
    catalog: Any
    real: Any


# ------------------------------------------------------------------ catalog


def load_catalog(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(kind, name or alias) -> record."""
    return index(json.loads(path.read_text(encoding="utf-8"))["recipes"])


def index(records: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(kind, name or alias) -> record."""
    catalog = {(r["kind"], r["name"]): r for r in records}
    for r in records:
        for alias in r.get("aliases") or ():
            catalog.setdefault((r["kind"], alias), r)
    return catalog


def uncompared_fields(records: Iterable[dict[str, Any]]) -> list[str]:
    """Stored fields neither compared nor listed in NOT_COMPARED with a reason."""
    stored = {k for r in records for k in r}
    return sorted(stored - COMPARED - set(NOT_COMPARED))


# ------------------------------------------------------------------ comparing


def flat(prefix: str, value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from flat(f"{prefix}.{k}", v)
    else:
        yield prefix, value


def norm(v: Any) -> Any:
    """Spelling differences that are not differences: 1 vs 1.0, tuples as lists."""
    if isinstance(v, bool):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, list):
        return [norm(x) for x in v]
    return v


def _precision_recipe(cat: dict[str, Any], real: dict[str, Any]) -> tuple[Any, Any] | None:
    """(catalog, real) names of the mixed-precision preset, or None when not comparable: the real
    object does not record its preset's name, so it is the presets it equals field for field
    (build_recipe.precision_presets); a recipe that edits the preset matches none, and then its
    fp8/fp4 fields are what is compared."""
    c = (cat.get("features") or {}).get("precision_recipe")
    r = (real.get("features") or {}).get("precision_recipe")
    if r is not None or c is None:
        return c, r
    presets = real.get("precision_presets") or []
    if not presets:
        return None
    return c, c if c in presets else presets[0] if len(presets) == 1 else presets


def compare(cat: dict[str, Any], real: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """Every stored field vs the ConfigContainer the recipe function returned."""
    diffs = []
    for f in TOP_FIELDS:
        if f == "hf_model_id" and real.get(f) is None:
            continue  # the provider does not always keep the HF id (a wheel-defined provider class)
        if norm(cat.get(f)) != norm(real.get(f)):
            diffs.append((f, cat.get(f), real.get(f)))
    for section in ("dataset", "features"):
        c = dict(flat(section, cat.get(section) or {}))
        r = dict(flat(section, real.get(section) or {}))
        c.pop("features.precision_recipe", None)
        r.pop("features.precision_recipe", None)
        for k in sorted(set(c) | set(r)):
            if norm(c.get(k)) != norm(r.get(k)):
                diffs.append((k, c.get(k), r.get(k)))
    names = _precision_recipe(cat, real)
    if names is not None and names[0] != names[1]:
        diffs.append(("features.precision_recipe", *names))
    c_env = {k: str(v) for k, v in (cat.get("env_vars") or {}).items()}
    r_env = {k: str(v) for k, v in (real.get("env_vars") or {}).items()}
    for k in sorted(set(c_env) | set(r_env)):
        if c_env.get(k) != r_env.get(k):
            diffs.append((f"env_vars.{k}", c_env.get(k), r_env.get(k)))
    return diffs


def raises_difference(cat: dict[str, Any], line: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """`raises_not_implemented` vs what the real function did (checkable for every recipe that got
    past the HF config: a recipe that raises does so before or instead of building)."""
    err = line.get("error") or {}
    real = line.get("stage") == "build" and err.get("type") == "NotImplementedError"
    if not line.get("built") and not real:
        return None  # it stopped for another reason first
    if bool(cat.get("raises_not_implemented")) != real:
        return ("raises_not_implemented", cat.get("raises_not_implemented"), real)
    return None


def _effective_catalog(cat: dict[str, Any]) -> dict[str, Any]:
    """The catalog's values as the project's readers take them for the running job."""
    from mbridge_launch.catalog_sync.findings import effective_etp
    from mbridge_launch.plan.shipped import distributed_optimizer

    features = cat.get("features") or {}
    tp, ep = cat.get("tensor_model_parallel_size"), cat.get("expert_model_parallel_size")
    out = {f: cat.get(f) for f in LAYOUT}
    if isinstance(tp, int) and isinstance(ep, int):
        out["expert_tensor_parallel_size"] = effective_etp(tp, ep, cat.get("expert_tensor_parallel_size"))
    # Bridge turns SP off at TP=1 when it finalizes the provider (models/transformer_config.py)
    if cat.get("sequence_parallel") is True and isinstance(tp, int) and tp <= 1:
        out["sequence_parallel"] = False
    out["peft_scheme"] = cat.get("peft_scheme")
    out["dataset.selector"] = (cat.get("dataset") or {}).get("selector")
    for f in ("fp8", "fp8_recipe", "fp4", "fp4_recipe", "recompute_granularity", "use_megatron_fsdp"):
        out[f"features.{f}"] = features.get(f)
    out["distributed_optimizer"] = distributed_optimizer(SimpleNamespace(features=features, mode=cat.get("mode")))
    return out


def _effective_real(validated: dict[str, Any]) -> dict[str, Any]:
    features = validated.get("features") or {}
    out = {f: validated.get(f) for f in LAYOUT}
    out["peft_scheme"] = validated.get("peft_scheme")
    out["dataset.selector"] = (validated.get("dataset") or {}).get("selector")
    for f in ("fp8", "fp8_recipe", "fp4", "fp4_recipe", "recompute_granularity", "use_megatron_fsdp"):
        out[f"features.{f}"] = features.get(f)
    # after validation both switches agree (_validate_and_sync_distributed_optimizer_settings)
    out["distributed_optimizer"] = features.get("use_distributed_optimizer")
    return out


def compare_effective(cat: dict[str, Any], validated: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    c, r = _effective_catalog(cat), _effective_real(validated)
    return [(k, c[k], r[k]) for k in c if norm(c[k]) != norm(r[k])]


def differences(lines: list[dict[str, Any]], catalog: dict[tuple[str, str], dict[str, Any]]) -> list[Difference]:
    out = []
    for line in lines:
        cat = catalog.get((str(line.get("kind")), line["name"]))
        if cat is None:
            continue
        found = []
        raised = raises_difference(cat, line)
        if raised:
            found.append(("recipe", *raised))
        if line.get("built"):
            found += [("recipe", *d) for d in compare(cat, line["recipe"])]
        if line.get("validated"):
            found += [("validated", *d) for d in compare_effective(cat, line["validated_fields"])]
        out += [Difference(line["name"], line["kind"], stage, f, c, r) for stage, f, c, r in found]
    return out


# ------------------------------------------------------------------ reviewed differences


def load_reviewed(path: Path | None = None) -> list[dict[str, Any]]:
    import yaml

    path = path or reviewed_file()
    if not path.exists():
        return []
    entries = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    for entry in entries:
        missing = {"recipes", "stage", "field", "catalog", "real", "reason"} - set(entry)
        if missing or not str(entry.get("reason") or "").strip():
            raise ValueError(f"reviewed difference without {sorted(missing) or ['reason']}: {entry}")
    return entries


def is_reviewed(diff: Difference, entry: dict[str, Any]) -> bool:
    recipes = entry["recipes"] if isinstance(entry["recipes"], list) else [entry["recipes"]]
    return (
        any(fnmatch.fnmatchcase(diff.name, pattern) for pattern in recipes)
        and entry["stage"] == diff.stage and entry["field"] == diff.field
        and norm(entry["catalog"]) == norm(diff.catalog)
        # "*": any real value, only where the catalog claims none (null: the HF config decides)
        and (norm(entry["real"]) == norm(diff.real) or (entry["real"] == ANY_VALUE and diff.catalog is None))
    )


def triage(diffs: list[Difference], reviewed: list[dict[str, Any]]) -> tuple[list[Difference], list[dict[str, Any]]]:
    """(differences no entry covers, entries that cover no difference: stale)."""
    used = [False] * len(reviewed)
    open_diffs = []
    for diff in diffs:
        hits = [i for i, entry in enumerate(reviewed) if is_reviewed(diff, entry)]
        for i in hits:
            used[i] = True
        if not hits:
            open_diffs.append(diff)
    return open_diffs, [entry for entry, hit in zip(reviewed, used) if not hit]


# ------------------------------------------------------------------ counts


def reason_of(line: dict[str, Any]) -> str:
    err = line.get("error") or {}
    msg = f"{err.get('chain', '')} {err.get('message', '')}"
    if "offline" in msg.lower() or "config.json" in msg or "LocalEntryNotFound" in msg or "outgoing traffic" in msg:
        return "no offline HF config.json (architecture not written by hf_cache.py)"
    if "ShimUsed" in msg:
        return "used the Transformer Engine shim for real"
    if line.get("stage") == "build" and "NotImplementedError" in msg:
        return "recipe raises NotImplementedError"
    return f"{err.get('type')}: {err.get('message', '')[:140]}"


def summary(lines: list[dict[str, Any]], catalog: dict[tuple[str, str], dict[str, Any]],
            open_diffs: list[Difference], reviewed_diffs: int) -> dict[str, Any]:
    """Counts per kind: recipes, built (= checked: every stored field compared), validated
    (the effective comparison too), agreeing, not checkable by reason."""
    out: dict[str, Any] = {}
    disagree = {(d.kind, d.name) for d in open_diffs}
    for kind in ("library", "benchmark"):
        mine = [line for line in lines if line.get("kind") == kind]
        built = [line for line in mine if line.get("built") and (kind, line["name"]) in catalog]
        reasons = collections.Counter(reason_of(line) for line in mine if not line.get("built"))
        out[kind] = {
            "recipes": len(mine), "checked": len(built),
            "validated": sum(1 for line in built if line.get("validated")),
            "agree_or_reviewed": sum(1 for line in built if (kind, line["name"]) not in disagree),
            "not_checkable": dict(reasons.most_common()),
        }
    out["reviewed_differences"] = reviewed_diffs
    out["open_differences"] = len(open_diffs)
    return out


def summary_line(s: dict[str, Any]) -> str:
    parts = []
    for kind in ("library", "benchmark"):
        k = s[kind]
        share = 100.0 * k["checked"] / k["recipes"] if k["recipes"] else 0.0
        parts.append(f"{kind} {k['checked']}/{k['recipes']} checked ({share:.0f}%), {k['validated']} validated, "
                     f"{k['agree_or_reviewed']} agree or reviewed, {k['recipes'] - k['checked']} not checkable")
    return (f"catalog conformance: {'; '.join(parts)}; {s['reviewed_differences']} reviewed differences, "
            f"{s['open_differences']} open")


def reviewed_file(version: str = "0.6.2") -> Path:
    """The reviewed differences of a release, beside its catalog: the package's for a shipped
    release, the site or user folder's for one synced there (knowledge.catalog.companion_file)."""
    from mbridge_launch.knowledge.catalog import companion_file

    return companion_file(f"reviewed-differences-{version}.yaml")


# ------------------------------------------------------------------ real rejections and findings

# finding code -> (regex over the real "ErrorType: message", the real check it predicts)
PREDICTS: dict[str, tuple[str, str]] = {
    "in_batch_packing_mbs1": (
        r"ValueError: micro_batch_size should be greater than 1 when using enable_in_batch_packing",
        "ConfigContainer.validate(): enable_in_batch_packing and train.micro_batch_size == 1 raises",
    ),
    "architecture_unset": (
        r"ZeroDivisionError",
        ("TransformerConfig.__post_init__: kv_channels = hidden_size // num_attention_heads with the "
        "provider's default num_attention_heads 0"),
    ),
    "data_cache_path_missing": (
        r"AssertionError: --data-cache-path must be provided when using --dataloader-(fast-cache-load|defer-npy-index-mmap)",
        "BlendedMegatronDatasetConfig.__post_init__: fast_cache_load / defer_npy_index_mmap need path_to_cache",
    ),
    "vp_conflicts_with_layout": (
        r"AssertionError: virtual_pipeline_model_parallel_size conflicts with pipeline_model_parallel_layout",
        "TransformerConfig.__post_init__: VP must equal the layout's stages / PP",
    ),
    "layout_not_divisible_by_pp": (
        r"AssertionError: pipeline_model_parallel_layout must be divisible by pipeline_model_parallel_size",
        "PipelineParallelLayerLayout.__init__: the layout's stages must divide by PP",
    ),
    "dispatcher_sms_conflict": (
        r"ValueError: Conflicting deprecated SM-count knobs",
        "TransformerConfig.__post_init__ (megatron-core 0.19.2): moe_deepep_num_sms and moe_hybridep_num_sms differ",
    ),
    "seq_length_mismatch": (
        r"AssertionError: Please ensure sequence length configuration in model config and dataset config match",
        "ConfigContainer.validate(): model seq_length == dataset seq_length for the GPT/SFT/VLM dataset classes",
    ),
    "seq_length_from_hf": (
        r"AssertionError: Please ensure sequence length configuration in model config and dataset config match",
        "as seq_length_mismatch, with the model's seq_length from the HF config (max_position_embeddings)",
    ),
    "recompute_modules_unknown": (
        r"AssertionError: Invalid choices for recompute_modules",
        "TransformerConfig.__post_init__: selective recompute modules must be ones megatron-core 0.19.2 knows",
    ),
    "fsdp_ckpt_format": (
        r"AssertionError: Megatron-FSDP requires the fsdp_dtensor checkpointing format",
        "ConfigContainer._validate_and_apply_megatron_fsdp_configs: FSDP with save/load needs fsdp_dtensor",
    ),
    "gbs_not_divisible": (
        r"AssertionError: (eval_)?global_batch_size \(\d+\) must be divisible by",
        ("ConfigContainer.validate(): eval_global_batch_size % (eval_micro_batch_size x DP); the eval sizes "
        "default to the training ones, which the finding checks"),
    ),
    "cp_seq_not_divisible": (
        r"AssertionError: Sequence length must be divisible by 2 \* context parallel size",
        "ConfigContainer.validate(): seq_length % (2 x CP) with CP > 1",
    ),
    "raises_not_implemented": (
        r"NotImplementedError",
        "the recipe function itself raises (e.g. PEFT for Qwen3-Next)",
    ),
}



def error_text(line: dict[str, Any]) -> str:
    error = line.get("error") or {}
    return f"{error.get('type', '')}: {error.get('message', '')}"


def predicted_by(codes: list[str], text: str) -> list[str]:
    """The finding codes among `codes` whose prediction matches the real error text."""
    return [c for c in codes if c in PREDICTS and re.search(PREDICTS[c][0], text)]


def is_rejection(line: dict[str, Any]) -> bool:
    """Rejected by the real code: validation (or an override) failed after a build, or the recipe
    function raised NotImplementedError (its own refusal). Other build failures are not the recipe's:
    no config.json for the model, an import the environment lacks (not checkable)."""
    if line.get("validated"):
        return False
    if line.get("built"):
        return line.get("stage") in ("validate", "override")
    return (line.get("error") or {}).get("type") == "NotImplementedError"


# ------------------------------------------------------------------ one report (catalog verify)


@dataclass
class Rejection:
    recipe: str
    kind: str
    stage: str
    error: str
    predicted_by: list[str]  # the recipe's catalog findings that predict this error (empty: unflagged)


@dataclass
class Report:
    recipes: int = 0
    built: int = 0
    validated: int = 0
    agree: int = 0
    differences: list[Difference] = field(default_factory=list)
    unexplained: list[Difference] = field(default_factory=list)  # in no reviewed entry
    rejections: list[Rejection] = field(default_factory=list)
    not_built: list[tuple[str, str]] = field(default_factory=list)  # (recipe, reason)

    @property
    def unflagged(self) -> list[Rejection]:
        return [r for r in self.rejections if not r.predicted_by]


def report(records: list[dict[str, Any]], lines: list[dict[str, Any]], reviewed: list[dict[str, Any]]) -> Report:
    catalog = index(records)
    out = Report(recipes=len(lines))
    out.differences = differences(lines, catalog)
    out.unexplained, _ = triage(out.differences, reviewed)
    differing = {(d.kind, d.name) for d in out.differences}
    for line in lines:
        key = (str(line.get("kind")), line["name"])
        if line.get("built"):
            out.built += 1
            out.validated += bool(line.get("validated"))
            out.agree += key not in differing
        else:
            out.not_built.append((line["name"], reason_of(line)))
        if is_rejection(line):
            codes = [f["code"] for f in (catalog.get(key) or {}).get("findings") or ()]
            text = " ".join(error_text(line).split())
            out.rejections.append(Rejection(line["name"], key[0], str(line.get("stage")), text,
                                            predicted_by(codes, text)))
    return out
