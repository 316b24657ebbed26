"""The words every command shares, each defined once with its one alias table: goals (a Plan's
mode), recipe tasks, training precisions, GPU types, and the layout <-> Megatron Bridge
ConfigContainer key table.

`recommend`, `plan`, `estimate` and the Plan files read by `preflight` all normalize through
here, so a spelling one of them accepts is accepted by all (tests/unit/test_vocabulary.py).
Executor names are the executor registry's (`mbridge_launch.executors.executor_names()`): the
registry is the one place that knows them.
"""

from __future__ import annotations

from mbridge_launch.base.errors import UserError

# ---------------------------------------------------------------------- goals and recipe tasks
# What the user trains: run_recipe.py's --mode values, and a Plan's `mode`.
GOALS = ("pretrain", "sft", "lora", "dora")
GOAL_ALIASES = {"peft": "lora", "finetune": "sft", "fine-tune": "sft"}
PEFT_GOALS = ("lora", "dora")
FINETUNE_GOALS = ("sft", *PEFT_GOALS)
# The task in a recipe's name (<model>_<task>_...): LoRA and DoRA both use the peft recipes.
RECIPE_TASKS = ("pretrain", "sft", "peft")
# What an error lists as the valid goals (the canonical ones, and peft as the common word).
GOAL_CHOICES = (*GOALS, "peft")


def goal_or_none(text: str | None) -> str | None:
    """The canonical goal of a spelling (case and surrounding spaces ignored), else None."""
    key = (text or "").strip().lower()
    value = GOAL_ALIASES.get(key, key)
    return value if value in GOALS else None


def normalize_goal(text: str | None, flag: str = "--goal") -> str:
    """The canonical goal; an empty value is pretrain; an unknown one is a UserError naming `flag`."""
    if not text:
        return "pretrain"
    value = goal_or_none(text)
    if value is None:
        raise UserError("arg.choice", flag=flag, value=text, choices=", ".join(GOAL_CHOICES))
    return value


def recipe_task(goal: str) -> str:
    """The recipe task a goal trains with: lora and dora use the peft recipes."""
    return "peft" if goal in PEFT_GOALS else goal


def recipe_task_of(text: str) -> str:
    """The recipe task a spelling of a task or of a goal names (lora, dora, peft: peft); an
    unknown word is returned as written, for the caller to refuse with the valid tasks."""
    key = (text or "").strip().lower()
    if key in RECIPE_TASKS:
        return key
    goal = goal_or_none(key)
    return recipe_task(goal) if goal else text


def task_goal(task: str) -> str:
    """The goal a recipe task trains when nothing else says: the peft recipes train LoRA."""
    return "lora" if task == "peft" else task


# ---------------------------------------------------------------------- precisions
# The recipe names' precision tokens, and the published tables' and users' other spellings.
PRECISIONS = ("bf16", "fp8cs", "fp8mx", "fp8sc", "fp8ds", "nvfp4")
PRECISION_ALIASES = {
    "bfloat16": "bf16",
    "fp8": "fp8cs", "fp8_cs": "fp8cs", "fp8-cs": "fp8cs", "fp8_current_scaling": "fp8cs",
    "mxfp8": "fp8mx", "fp8_mx": "fp8mx",
    "fp8_sc": "fp8sc", "fp8_blockwise": "fp8sc", "fp8blockwise": "fp8sc", "fp8_subchannel": "fp8sc",
    "fp8_ds": "fp8ds", "fp8_delayed": "fp8ds",
    "fp4": "nvfp4",
}
# Which tensor-core peak a precision's GEMMs run at.
PEAK_CLASS = {"bf16": "bf16", "fp8cs": "fp8", "fp8mx": "fp8", "fp8sc": "fp8", "fp8ds": "fp8", "nvfp4": "fp4"}


def normalize_precision(text: str | None, flag: str | None = None) -> str:
    """The canonical precision of a spelling (case and surrounding spaces ignored). Unknown: a
    UserError naming `flag` when the value came from one, else naming the precision."""
    key = (text or "").strip().lower()
    value = PRECISION_ALIASES.get(key, key)
    if value in PRECISIONS:
        return value
    if flag:
        raise UserError("arg.choice", flag=flag, value=text, choices=", ".join(PRECISIONS))
    raise UserError("hardware.unknown_precision", precision=text, valid=", ".join(PRECISIONS))


# ---------------------------------------------------------------------- GPU types
# The systems of catalog/hardware.yaml (one entry each, same names) and their other spellings;
# a label with spaces ("H100 SXM") is read with dashes ("h100-sxm").
GPU_TYPES = ("h100", "h200", "b200", "b300", "gb200", "gb300")
GPU_ALIASES = {
    **dict.fromkeys(("h100-sxm", "h100_sxm", "h100sxm", "dgx-h100", "hgx-h100", "h100-80gb"), "h100"),
    **dict.fromkeys(("h200-sxm", "h200_sxm", "h200sxm", "dgx-h200", "hgx-h200", "h200-141gb"), "h200"),
    **dict.fromkeys(("b200-sxm", "dgx-b200", "hgx-b200"), "b200"),
    **dict.fromkeys(("b300-sxm", "dgx-b300", "hgx-b300"), "b300"),
    **dict.fromkeys(("gb200-nvl72", "gb200nvl72", "gb200_nvl72"), "gb200"),
    **dict.fromkeys(("gb300-nvl72", "gb300nvl72", "gb300_nvl72"), "gb300"),
}
HOPPER = ("h100", "h200")
BLACKWELL = ("b200", "b300", "gb200", "gb300")
# Recipe hardware tokens newer than Blackwell (recipes exist; the planner has no numbers yet).
RUBIN = ("vr200", "r100")
# The <hw> of recipe names (<model>_<task>_<N>gpu_<hw>_<precision>...): no H200 recipes exist.
RECIPE_HARDWARE = ("h100", "b200", "b300", "gb200", "gb300", *RUBIN)
# Systems whose NVLink domain spans nodes: 4 GPUs per node, 72 per domain.
NVL72 = ("gb200", "gb300")


def gpu_type_key(text: str | None) -> str:
    """A GPU type as the tables spell it: lower case, spaces as dashes."""
    return (text or "").strip().lower().replace(" ", "-")


def gpu_type_or_none(text: str | None) -> str | None:
    """The canonical GPU type of a spelling, else None (`knowledge.hardware.get_hardware` turns
    that into an error listing the systems)."""
    key = gpu_type_key(text)
    value = GPU_ALIASES.get(key, key)
    return value if value in GPU_TYPES else None


# ---------------------------------------------------------------------- layout <-> Megatron keys
# Layout attribute -> the ConfigContainer path run_recipe.py's KEY=VALUE overrides name.
LAYOUT_KEYS = {
    "tp": "model.tensor_model_parallel_size",
    "pp": "model.pipeline_model_parallel_size",
    "vp": "model.virtual_pipeline_model_parallel_size",
    "cp": "model.context_parallel_size",
    "ep": "model.expert_model_parallel_size",
    "etp": "model.expert_tensor_parallel_size",
    "sp": "model.sequence_parallel",
    "mbs": "train.micro_batch_size",
    "gbs": "train.global_batch_size",
    "seq_length": "model.seq_length",
}
# Recipe attribute -> ConfigContainer path: the layout, and the other sizes the catalog records.
RECIPE_KEYS = {**LAYOUT_KEYS, "dataset_seq_length": "dataset.seq_length", "train_iters": "train.train_iters"}


def catalog_field(attr: str) -> str:
    """The name the recipe catalog stores a RECIPE_KEYS attribute under: the Megatron field name
    (tensor_model_parallel_size, ...); dataset.seq_length keeps its prefix (dataset_seq_length)."""
    section, _, leaf = RECIPE_KEYS[attr].partition(".")
    return f"dataset_{leaf}" if section == "dataset" else leaf


# ---------------------------------------------------------------------- sequence lengths
# A suffix counts 1,024 tokens per k, as the recipe names do (`_128k_config` is 131,072 tokens),
# so `--seq-length 128k` asks for exactly the sequence length of a 128k recipe.
SEQ_SUFFIXES = {"k": 1024, "m": 1024 * 1024}


def parse_seq_length(text: object) -> int:
    """Tokens from '4096', '4k', '32K', '128k' (131072) or '1m'; spaces around are ignored. A value
    that is none of these raises BadNumber, whose reason() says the accepted forms: one parser
    for every --seq-length (recommend, plan, estimate)."""
    from mbridge_launch.base.numbers import ANY_INT, BadNumber, whole

    if isinstance(text, str):
        stripped = text.strip()
        factor = SEQ_SUFFIXES.get(stripped[-1:].lower())
        if factor is not None:
            try:
                return whole(stripped[:-1], *ANY_INT) * factor
            except BadNumber:
                raise BadSeqLength(text) from None
        try:
            return whole(stripped, *ANY_INT)
        except BadNumber:
            raise BadSeqLength(text) from None
    return whole(text, *ANY_INT)


class BadSeqLength(ValueError):
    """A --seq-length that is neither a whole number nor one with a k/m suffix."""

    def __init__(self, value: object) -> None:
        from mbridge_launch.base.numbers import shown

        self.shown = shown(value)
        super().__init__(f"{self.shown} is not a sequence length")

    def reason(self) -> str:
        from mbridge_launch.base.i18n import t

        return t("vocabulary.seq_length_bad", value=self.shown)
