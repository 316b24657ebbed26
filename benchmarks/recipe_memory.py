"""The memory model against NVIDIA's shipped library recipes.

    python benchmarks/recipe_memory.py [--all] [--no-write]
    python benchmarks/recipe_memory.py --import-build BUILD.jsonl [PLACEHOLDERS.jsonl]

Every 0.6.2 LIBRARY recipe of the catalog (kind == library, gpus not null) is estimated at its
named GPU count and system with its own layout and settings (TP/PP/VP/CP/EP/ETP/SP, MBS, GBS,
sequence length, recompute, Megatron-FSDP, distributed optimizer, precision, PEFT, uneven
pipeline stages). NVIDIA ships these layouts, so a recipe the model declares above HBM is a
question for the model first: the table prints the estimate by component against usable HBM,
the settings that drive it, and a verdict. `--all` prints every recipe (default: those above
usable HBM and a summary). Writes the "Recipe memory" section of benchmarks/RESULTS.md unless
--no-write.

Every recipe above usable HBM is put in one class (issue 34, item 2), in this order:
  rejected    the real Megatron Bridge 0.6.2 stops it as shipped (build or ConfigContainer.validate(),
              data/recipe_memory_real_build.json, written by --import-build from tests/bridge/build_recipe.py)
  static      weights + gradients + optimizer state + the fixed allowance alone are above the whole HBM
              (mbridge_launch/plan/static_floor.py): it cannot fit by arithmetic at that count
  activations dense bf16 model without recompute, text data: the static memory plus a lower bound of the
              saved activations on the first pipeline rank (the tensors Korthikanti et al. 2022, "Reducing
              Activation Recomputation in Large Transformer Models", sec. 4.1 count, less attention scores
              and dropout masks, at the model's own widths; x the micro-batches 1F1B keeps in flight there:
              activation_floor_gib) is above the whole HBM
  open        none of these: the memory model and NVIDIA disagree and no cause is established
"""

from __future__ import annotations

import argparse
import collections
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mbridge_launch.knowledge.catalog import load_catalog  # noqa: E402
from mbridge_launch.knowledge.hardware import get_hardware  # noqa: E402
from mbridge_launch.knowledge.models import load_arch  # noqa: E402
from mbridge_launch.plan.shipped import with_recipe_settings  # noqa: E402
from mbridge_launch.planner.memory import GRAD_BYTES, HEADROOM, estimate_memory  # noqa: E402
from mbridge_launch.planner.recipe_settings import applied, memory_settings  # noqa: E402
from mbridge_launch.recommend.build import _recipe_layout  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
SECTION = "## Recipe memory (`python benchmarks/recipe_memory.py`)"
# Settings the memory model does not represent; a recipe that relies on one is reported, not fitted.
# (Fine-grained activation offloading, CPU offloading, the precision-aware optimizer's dtypes,
# optimizer CPU offload, the gradient dtype, CUDA graphs and fused cross entropy are modelled:
# planner.recipe_settings reads them from the catalog.)
UNMODELLED: tuple[str, ...] = ()


FINDINGS = [
    ("**Classes (issue 34, item 2; part 11).** Before: 89 of 276 recipes above usable HBM, none with a "
     "stated cause. Now: 85 above (the vocabulary fix below), each in one class of the table above: "
     "rejected 14 (the real 0.6.2 build stops it: DeepSeek-V4-Flash's `mhc` recompute module x5, model vs "
     "dataset sequence length x3 (Nemotron Nano v2 9B/12B, Kimi K2: model 131072, dataset 8192/4096), eval "
     "batch not divisible x3 (Qwen3.5-VL), in-batch packing with MBS1 (Ministral 3 8B SFT), Megatron-FSDP "
     "without the fsdp_dtensor checkpoint format (Qwen3.5-VL 35B 2-GPU), PEFT not implemented (Qwen3-Next)); "
     "static 20 (weights + gradients + optimizer + 3 GiB above the whole HBM; recommend's card now says "
     "'cannot fit by arithmetic', `pitfall.memory_static_over_shipped`); activations 8 (bf16 dense text "
     "recipes without recompute whose first pipeline rank's saved tensors, counted from the model's widths, "
     "push past the whole HBM: Llama 3.1 70B/405B at 128k, Qwen2/2.5 72B at TP8 without sequence "
     "parallelism, Qwen2.5 14B); open 43, listed by name in tests/unit/test_recipe_memory_classes.py. "
     "Real 0.6.2 build of the 89 (data/recipe_memory_real_build.json): 58 validate as shipped, 11 more "
     "with the user's inputs (PEFT checkpoint), 14 rejected, 5 not built offline (no config.json in the "
     "tier's HF cache: DeepSeek-V4-Pro, Gemma 4 E4B, Nemotron Omni), 1 needs data files."),
    ("- **The run's vocabulary (fixed at the catalog).** `_pretrain_common` sets "
     "`tokenizer.use_tokenizer_vocab_size=True` and 48 library pretraining recipes a NullTokenizer of 32000 "
     "entries (gpt3_175b one of 50304), so Bridge sizes embedding and output layer from the tokenizer (training/setup.py "
     "`_validate_and_set_vocab_size`), not from the model's 128256-262144 (checked by building llama3_8b, "
     "gemma3_1b, qwen25_7b, glm45_air and nemotronh_8b with the real code). The catalog now records "
     "tokenizer_type / tokenizer_vocab_size / use_tokenizer_vocab_size; this benchmark estimates the recipes as "
     "shipped with it (recipe_memory.with_run_vocab). Not in the wheel: a run with a real tokenizer has the "
     "model's vocabulary and plan/recommend/preflight/estimate keep one figure, so recommend's card still "
     "counts the model's (llama3_8b on 2 H100: 92.7 GiB static there, 83.9 here). gemma3_1b (262144 -> 32000: logits 16 -> 2 GiB), gemma4_e4b, llama32_3b and "
     "llama3_70b 16k pretraining now fit; llama3_8b on 2 H100 stays above by arithmetic (83.9 GiB static)."),
    ("- **Open, candidates not verified:** VLM datasets pad a batch to its longest sample (the model "
     "charges every sample the full sequence: 19 of the 43 open are VLM or omni); Nemotron-H/Nano v2 providers "
     "have no vocab_size, so their SFT runs take the NullTokenizer's 32000 too (not applied: the catalog "
     "does not record the provider's vocab); Mamba/MoE activation terms; nemotron_omni's weights are "
     "counted at 55.7 GiB per TP4 rank where 31.6B parameters give 14.7 (class static holds either way: "
     "31.6B x 18 bytes / 4 GPUs = 132 GiB); the 3 GiB fixed allowance decides 'static' for "
     "exaone_moe_236b (82.3 GiB) and step37 (82.7 GiB)."),
    "",
    ("Why the model and NVIDIA disagree, and what was changed (memory model of `mbridge_launch/planner/memory.py`, "
    "recipe settings of `mbridge_launch/plan/shipped.py`):"),
    "",
    ("- **Distributed optimizer of the SFT recipes (fixed).** The catalog records `ddp.use_distributed_optimizer`, "
    "which `_sft_common`/`_peft_common` leave false; Bridge turns the distributed optimizer on when either the DDP "
    "or the optimizer config asks for it (`training/config.py`, `_validate_and_sync_distributed_optimizer_settings`) "
    "and the shared optimizer helper asks for it. Only PEFT recipes (and qwen3_600m's 128k SFT) set "
    "`optimizer.use_distributed_optimizer=False` too. Estimated with the DDP switch, SFT recipes carried the full "
    "12 bytes of fp32 master weights and Adam moments per parameter: 60 recipes said 'no dist-opt', now 31 (the PEFT ones, which barely have optimizer state)."),
    ("- **LoRA adapters of MoE experts (fixed).** Bridge 0.6.2 `peft/lora.py` gives the grouped expert linears of an "
    "EP rank ONE shared adapter (`share_expert_adapters=True`), not one per expert; the model counted one per "
    "expert (4.4B adapter parameters for Qwen3-Next's 512 experts instead of ~0.1B)."),
    ("- **Checked and kept:** the distributed optimizer shards master weights and moments over DP x CP (Megatron's "
    "data-parallel group with context parallelism) and expert state over expert-DP, as the model does; the main "
    "gradient buffer is fp32 (`grad_reduce_in_fp32=True` in every library recipe) and full size (reduce-scatter "
    "leaves the buffer allocated); full recompute keeps each layer's input only; frozen PEFT weights carry no "
    "gradients or optimizer state. The allowance (3 GiB + 5% of the rest, 6.5-8.5 GiB at 80 GB) is within the "
    "CUDA context, NCCL buffers and allocator slack Megatron runs with; lowering it would move only the four "
    "recipes within 3 GiB of the limit."),
    ("- **Recipe settings (issue 34):** the catalog now records and the model charges CPU activation offloading "
    "(`cpu_offloading_num_layers`), fine-grained `offload_modules`, the precision-aware optimizer's dtypes (bf16 "
    "moments; an fp32 master kept as its 16-bit remainder), optimizer CPU offload, `grad_reduce_in_fp32`, per-layer "
    "CUDA graphs' static buffers and fused cross entropy (`mbridge_launch/planner/recipe_settings.py`). The "
    "earlier list of 'precision-aware' recipe modules was wrong for GLM-4.5, Qwen3 and Moonlight H100 recipes: "
    "their 0.6.2 configs keep fp32 Adam state."),
    ("- **Recipes that do not fit as shipped by physics, not by a constant:** static memory alone (weights + fp32 "
    "gradients + sharded optimizer) above 80 GB: llama3_8b/llama31_8b pretrain on 2 H100 (8.0B params x (2 + 4 + "
    "12/2) bytes = 89.7 GiB; H200's 141 GB fits it), qwen3_next_80b PEFT on 1 H100 (147 GiB of bf16 weights); "
    "128k-token Llama 3.1 70B/405B pretraining without recompute (hundreds of GiB of activations for the interleaved "
    "pipeline's in-flight micro-batches). VLM SFT/PEFT recipes are estimated with every sample at the full sequence "
    "length; their datasets pad to the longest sample of a batch, so shorter data needs less."),
    ("- Recipes whose own layout breaks a parallelism rule (catalog findings: RULE_PP_LAYERS where the recipe sets a "
    "`pipeline_model_parallel_layout` the planner's Layout does not carry, RULE_MOE_SP, RULE_GBS) are not kept as "
    "shipped by recommend: 12 recipes."),
    ("- **GLM-5.2 under-counted (issue 34, fixed in part; `python benchmarks/glm52_352_memory.py`).** Three terms "
    "were missing. (1) Only the first and last pipeline stage were estimated; GLM-5.2's recipe layout "
    "(`Et|t||tttt|...`, PP13 VP2) gives middle ranks 8 MoE layers against 5 and 4 at the ends, so a middle rank is "
    "now estimated where it holds more layers than an end counting its embedding, loss and MTP layers (416-GPU "
    "H100 recipe: 46.2 -> 55.7 GiB, a middle rank; GLM-4.5V SFT on 128 H100, 7-layer middle ranks without "
    "recompute: 25.3 -> 77.5 GiB, now just above 76). (2) A last stage running MTP builds its own word embedding "
    "(Megatron Core gpt_model.py: `pre_process or mtp_process`): +1.8 GiB weights and as much gradient for GLM-5.2, "
    "+2 GiB on DeepSeek-V3's PP8 recipe. (3) DeepSeek sparse attention (`planner/dsa.py`): indexer weights on the "
    "layers that run one (GLM-5.2 shares each top-k over four layers), the int32 top-k and indexer-loss gradients "
    "they save, and the cuDNN scoring scratch (chunked at 1 GiB of scores + 2 GiB of top-k scratch): small at 4k "
    "tokens (0.3 GiB), up to 3 GiB at 200k. Against the reported 65 GiB allocated on 352 H100 (layout not "
    "published; reconstructions resized from the 416-GPU recipe) the allocated part of the estimate went from "
    "39.6-40.8 GiB (-37 to -39%; what the issue quotes as 40) to 47.6-49.8 GiB (-23 to -27%) for the layouts "
    "that keep the 416 recipe's shape; a layout with 8 layers plus MTP and loss on the last rank gives 67.3 GiB "
    "(+4%). Not modelled: Megatron's microbatch_group_size_per_vp_stage (the recipe sets 16 for PP13, the model "
    "assumes PP: 3 more chunks in flight), MoE routing imbalance (expert inputs scale with the tokens a rank "
    "receives; the model assumes the average), absorbed-MLA's latent layout in the recomputed layer's working set."),
]


def library_recipes() -> list[Any]:
    catalog = load_catalog()
    return [r for r in catalog.recipes if r.kind == "library" and r.gpus]


def recipe_layout(recipe: Any) -> Any:
    """The recipe's own layout at its own count (what recommend keeps for a shipped request)."""
    return with_recipe_settings(_recipe_layout(recipe, recipe.gpus), recipe)


def settings_text(recipe: Any, layout: Any) -> str:
    parts = [f"TP{layout.tp} PP{layout.pp}" + (f" VP{layout.vp}" if layout.vp else "") + f" CP{layout.cp}",
             f"EP{layout.ep}" + (f" ETP{layout.etp}" if layout.etp else ""), f"DP{layout.dp}",
             f"MBS{layout.mbs} GBS{layout.gbs} seq{layout.seq_length}", f"recompute={layout.recompute}"
             + (f"/{layout.recompute_layers}" if layout.recompute_layers else "")]
    if layout.fsdp:
        parts.append("FSDP")
    if not layout.distributed_optimizer:
        parts.append("no dist-opt")
    if recipe.peft_scheme:
        parts.append(recipe.peft_scheme)
    parts += [f"{name}={value}" for name, value in applied(memory_settings(recipe.features, recipe.precision or "bf16"))]
    parts.append(recipe.precision or "bf16")
    return ", ".join(parts)


def unmodelled(recipe: Any) -> list[str]:
    features = recipe.features or {}
    return [k for k in UNMODELLED if features.get(k)]


def estimate(recipe: Any) -> dict[str, Any] | None:
    arch = load_arch(recipe.model) if recipe.model else None
    if arch is None or getattr(arch, "missing", ()):
        return None
    arch = with_run_vocab(arch, recipe)  # the tokenizer's vocabulary where the run takes it
    hw = get_hardware(recipe.hardware or "h100")
    layout = recipe_layout(recipe)
    mem = estimate_memory(arch, layout, hw.hbm_gb, precision=recipe.precision or "bf16", goal=recipe.mode or "pretrain",
                          grad_bytes=GRAD_BYTES)
    usable = HEADROOM * hw.hbm_gb
    return {"recipe": recipe, "layout": layout, "mem": mem, "usable": usable, "hbm": hw.hbm_gb,
            "fits": mem.fits, "unmodelled": unmodelled(recipe)}


def verdict(row: dict[str, Any]) -> str:
    if row["fits"]:
        return "fits"
    if row["unmodelled"]:
        return "above (relies on " + ", ".join(row["unmodelled"]) + ")"
    return "above"


REAL_BUILD = Path(__file__).resolve().parent / "data" / "recipe_memory_real_build.json"


# The vocabulary a recipe's run builds, where it is not the model's. Megatron Bridge 0.6.2 sizes the
# embedding and output layer from the tokenizer when the tokenizer config sets
# use_tokenizer_vocab_size (training/setup.py _validate_and_set_vocab_size; padded to
# make_vocab_size_divisible_by x TP as any vocabulary). Its pretraining recipes set it
# (recipes/common.py _pretrain_common) and then a NullTokenizer of DEFAULT_NULL_TOKENIZER_VOCAB_SIZE =
# 32000 for mock data: llama3_8b's pretraining run as shipped has 32000 rows, not 128256. The catalog
# records the three tokenizer fields (catalog_sync/extract.py FEATURE_FIELDS). Applied here, to the
# recipes as shipped, not in the wheel: a user's run with a real tokenizer has the model's vocabulary,
# and plan, recommend, preflight and estimate must keep one figure (tests/unit/test_plan_recipe_agreement.py).
def run_vocab_size(recipe: Any) -> int | None:
    """The tokenizer's vocabulary when the recipe's run takes it instead of the model's, else None."""
    features = getattr(recipe, "features", None) or {}
    size = features.get("tokenizer_vocab_size")
    if features.get("use_tokenizer_vocab_size") is True and isinstance(size, int) and size > 0:
        return size
    return None


def with_run_vocab(arch: Any, recipe: Any) -> Any:
    """The architecture with the vocabulary the recipe's run builds (unchanged where it is the model's)."""
    size = run_vocab_size(recipe)
    if arch is None or size is None or getattr(arch, "vocab_size", None) == size:
        return arch
    return replace(arch, vocab_size=size)

CLASSES = ("rejected", "static", "activations", "open")
GIB = 2**30


def real_build() -> dict[str, dict[str, Any]]:
    """name -> what the real 0.6.2 build said (data/recipe_memory_real_build.json)."""
    import json

    return json.loads(REAL_BUILD.read_text())["recipes"] if REAL_BUILD.exists() else {}


def layer_floor_bytes_per_token(arch: Any, tp: int, sp: bool) -> float:
    """Bytes per token one dense pre-norm layer must keep for its backward (bf16, flash attention,
    no dropout): each norm's input and output (the next GEMM's input), Q, K, V and the attention
    output, the MLP's first GEMM output and the activation's output. The tensors Korthikanti et al.
    2022 (sec. 4.1) count, less the attention scores and dropout masks; with GQA K and V have the
    KV heads' width. Norm tensors are split over TP only with sequence parallelism."""
    head = arch.kv_channels or arch.hidden_size // arch.num_attention_heads
    q = arch.num_attention_heads * head
    kv = (arch.num_query_groups or arch.num_attention_heads) * head
    ffn = arch.ffn_hidden_size or 4 * arch.hidden_size
    norms = 2 * 4 * arch.hidden_size
    split = 2 * (2 * q + 2 * kv + ffn * (2 if arch.gated_linear_unit else 1) + ffn)
    return (norms / tp if sp else norms) + split / tp


def activation_floor_gib(arch: Any, layout: Any) -> float | None:
    """A lower bound of the saved activations on the first pipeline rank (dense transformer, no
    recompute); None where it does not apply (MoE, hybrid, MLA, any recompute): the per-layer
    bytes above x its layers x the micro-batches in flight there. The first rank of a 1F1B
    schedule holds min(PP, micro-batches per step) micro-batches when its first backward starts
    (Narayanan et al. 2021; an interleaved schedule holds at least as many)."""
    if layout.recompute != "none" or arch.is_moe or arch.is_hybrid or arch.is_mla:
        return None
    first = layout.first_stage_layers or layout.split.first or arch.num_layers // layout.pp
    tokens = layout.seq_length // layout.cp * layout.mbs
    sp = bool(layout.sp) or layout.tp == 1
    microbatches = max(1, layout.gbs // (layout.mbs * max(1, layout.dp)))
    return layer_floor_bytes_per_token(arch, layout.tp, sp) * tokens * first * min(layout.pp, microbatches) / GIB


def classify(row: dict[str, Any], built: dict[str, dict[str, Any]]) -> tuple[str, str]:
    """The class of a recipe above usable HBM and the reason in one line (its figures)."""
    from mbridge_launch.plan.static_floor import static_gib

    recipe, mem, layout = row["recipe"], row["mem"], row["layout"]
    real = built.get(recipe.name, {})
    if real.get("result") == "rejects":
        return "rejected", f"0.6.2 {real.get('stage')}: {real.get('error')}"
    static, hbm = static_gib(mem), row["hbm"]
    if static > hbm:
        return "static", (f"weights {mem.weights:.1f} + gradients {mem.gradients:.1f} + optimizer {mem.optimizer:.1f} "
                          f"+ fixed 3.0 = {static:.1f} > HBM {hbm:.0f}")
    # text data fills every sample to the sequence length (GPT datasets; packed SFT); image and
    # audio datasets pad a batch to its longest sample, so their floor is not a bound
    # bf16 only: FP8/FP4 recipes save GEMM inputs in 8 bits, below this bf16 bound
    text = (recipe.dataset or {}).get("modality") == "text" and (recipe.precision or "bf16") == "bf16"
    floor = activation_floor_gib(with_run_vocab(load_arch(recipe.model), recipe), layout) if text else None
    if floor is not None and static + floor > hbm:
        return "activations", (f"static {static:.1f} + the first rank's saved activations >= {floor:.1f} "
                               f"(Korthikanti's per-layer bound x its layers x min(PP, micro-batches)) "
                               f"= {static + floor:.1f} > HBM {hbm:.0f}")
    return "open", f"static {static:.1f}; the model's activations {mem.activations:.1f} + logits {mem.logits:.1f}"


def import_build(paths: list[Path]) -> None:
    """Write data/recipe_memory_real_build.json from build_recipe.py's JSON lines: the first file
    as shipped, the second (optional) with --placeholder-inputs (PEFT checkpoint, Energon path)."""
    import json

    runs = [{d["name"]: d for d in map(json.loads, p.read_text().splitlines()) if "name" in d} for p in paths]
    first, inputs = runs[0], (runs[1] if len(runs) > 1 else {})
    out: dict[str, dict[str, Any]] = {}
    for name, d in sorted(first.items()):
        again = inputs.get(name, d)
        if d.get("validated"):
            out[name] = {"result": "validates"}
        elif again.get("validated"):
            out[name] = {"result": "validates with the user's inputs",
                         "without_them": (d.get("error") or {}).get("message", "")[:200]}
        else:
            error = again.get("error") or {}
            text = error.get("message", "").split("\n")[0]
            result = ("not built offline" if "Failed to load configuration" in text
                      else "needs the user's data files" if "data_files" in text else "rejects")
            out[name] = {"result": result, "stage": again.get("stage"),
                         "error": f"{error.get('type', '')}: {text}"[:260], "where": error.get("where")}
    REAL_BUILD.parent.mkdir(exist_ok=True)
    REAL_BUILD.write_text(json.dumps({
        "comment": ("Megatron Bridge 0.6.2 (tests/bridge env: CPU, torch.cuda answering as the recipe's GPU) building "
                    "and validating each library recipe the memory model estimated above usable HBM: "
                    "ENV/bin/python tests/bridge/build_recipe.py NAMES --out BUILD.jsonl, again with "
                    "--placeholder-inputs for those that did not validate, then "
                    "python benchmarks/recipe_memory.py --import-build BUILD.jsonl PLACEHOLDERS.jsonl"),
        "megatron_bridge": "0.6.2", "recipes": out}, indent=1) + "\n")
    print(f"wrote {REAL_BUILD}: {collections.Counter(v['result'] for v in out.values())}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--all", action="store_true", help="print every recipe, not only those above HBM")
    parser.add_argument("--no-write", action="store_true", help="do not write RESULTS.md")
    parser.add_argument("--import-build", nargs="+", type=Path, metavar="JSONL",
                        help="write data/recipe_memory_real_build.json from build_recipe.py output and stop")
    args = parser.parse_args()
    if args.import_build:
        import_build(args.import_build)
        return 0
    recipes = library_recipes()
    rows, unknown = [], []
    for recipe in recipes:
        row = estimate(recipe)
        (unknown.append(recipe.name) if row is None else rows.append(row))
    above = [r for r in rows if not r["fits"]]
    by_mode = collections.Counter(r["recipe"].mode for r in above)
    lines = [SECTION, "",
             (f"{len(recipes)} library recipes with a GPU count in the 0.6.2 catalog; {len(rows)} with a known "
              f"architecture estimated at their own count and system (H200 recipes: none; an H100 recipe is "
              f"estimated on H100's 80 GB) with their own layout, batch, recompute, FSDP, distributed optimizer, "
              f"precision and PEFT scheme; {len(unknown)} without a known architecture."), "",
             f"**Recipes above usable HBM ({HEADROOM:.0%} of HBM): {len(above)} of {len(rows)}**"
             + (f" ({', '.join(f'{m} {n}' for m, n in sorted(by_mode.items()))})" if above else "") + ".", "",
             *class_table(above), "",
             "| recipe | settings | weights | grads | optimizer | activations | logits | allowance | total | usable | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    shown = rows if args.all else above
    for r in sorted(shown, key=lambda r: r["mem"].total / r["usable"], reverse=True):
        m = r["mem"]
        lines.append(f"| {r['recipe'].name} | {settings_text(r['recipe'], r['layout'])} | {m.weights:.1f} | "
                     f"{m.gradients:.1f} | {m.optimizer:.1f} | {m.activations:.1f} | {m.logits:.1f} | {m.allowance:.1f} | "
                     f"{m.total:.1f} | {r['usable']:.1f} | {verdict(r)} |")
    lines += ["", "Class of each recipe above usable HBM, and why:", "", "| recipe | class | why |", "|---|---|---|"]
    built = real_build()
    for r in sorted(above, key=lambda r: (CLASSES.index(classify(r, built)[0]), r["recipe"].name)):
        cls, why = classify(r, built)
        lines.append(f"| {r['recipe'].name} | {cls} | {why.replace('|', '/')} |")
    lines += ["", *FINDINGS, ""]
    text = "\n".join(lines)
    print(text)
    if not args.all:
        margin = sorted(rows, key=lambda r: r["mem"].total / r["usable"], reverse=True)[:10]
        print("closest to the limit among all:")
        for r in margin:
            print(f"  {r['recipe'].name}: {r['mem'].total:.1f} / {r['usable']:.1f} GiB {r['mem'].as_dict()}")
    if not args.no_write:
        write_section(text)
    return 0


def class_table(above: list[dict[str, Any]]) -> list[str]:
    """Counts per class (issue 34, item 2) and what the real build said of the open ones."""
    built = real_build()
    counts = collections.Counter(classify(r, built)[0] for r in above)
    real = collections.Counter(built.get(r["recipe"].name, {}).get("result", "not run") for r in above)
    return ["| class | recipes | meaning |", "|---|---|---|",
            f"| rejected | {counts['rejected']} | the real 0.6.2 build or validate() stops it as shipped |",
            (f"| static | {counts['static']} | weights + gradients + optimizer + 3 GiB fixed above the whole HBM: "
             "cannot fit by arithmetic |"),
            (f"| activations | {counts['activations']} | static + a lower bound of the first rank's activations "
             "above the whole HBM (dense, bf16, no recompute, text data) |"),
            f"| open | {counts['open']} | no cause established: the model and NVIDIA disagree |", "",
            "Real 0.6.2 build of these recipes: " + ", ".join(f"{k} {n}" for k, n in sorted(real.items())) + "."]


def write_section(text: str) -> None:
    from results_file import write_section as write

    write(SECTION, text)

if __name__ == "__main__":
    sys.exit(main())
