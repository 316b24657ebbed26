"""What `recommend` applies to, decided in one place: NVIDIA GPUs of the planner's types, Slurm,
models with a Megatron Bridge recipe.

A request outside that scope is answered with exit 2 and a `scope.*` message that names the field,
the value (escaped by UserError) and what IS supported, instead of the generic "unknown GPU type"
or "unknown model, closest: ..." that would invite the user to keep guessing spellings:

- accelerators of other vendors (AMD Instinct, Intel Gaudi, Google TPU, AWS Trainium, Apple
  silicon, Huawei Ascend, ...) and CPU-only: Megatron Bridge trains on CUDA with Transformer
  Engine and NCCL, and its recipes name NVIDIA systems only;
- NVIDIA GPUs that neither the recipes nor the planner's hardware figures cover (A100, L40S,
  H800, H100 PCIe, ...), and Rubin, whose recipes exist but whose figures the planner lacks;
- schedulers other than Slurm: every executor writes an sbatch script (plain, NeMo-Run's
  SlurmExecutor, submitit's Slurm executor), and status, rollback and the ledger read sacct,
  squeue and scontrol;
- model kinds that no Megatron Bridge release ships a recipe or a bridge for (encoder-only,
  encoder-decoder, pure state-space, diffusion models other than the catalog's). This is decided
  only for a name the catalog does NOT resolve: a model with a recipe is always in scope (the
  hybrid Mamba Nemotron-H, FLUX and WAN are), and a name that merely matches nothing keeps the
  "unknown model, did you mean" answer.

A Kubernetes pod without Slurm (KUBERNETES_SERVICE_HOST set, no sbatch, no SLURM_*) only gets a
hint: the recommendation is still valid on the Slurm cluster the user will submit from.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from typing import Any

from mbridge_launch.base.errors import UserError
from mbridge_launch.base.i18n import Msg, msg
from mbridge_launch.knowledge.vocabulary import GPU_TYPES, RUBIN, gpu_type_key, gpu_type_or_none

SCHEDULERS = ("slurm",)

# --- accelerators -------------------------------------------------------------------------------------
# (pattern on the lower-case, dash-spaced --gpu-type, the vendor's product line); first match wins
_OTHER_VENDORS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), label) for p, label in (
    (r"^(amd-?)?(instinct-?)?mi\d{2,3}[a-z]?\d?$|^amd|radeon|rocm", "AMD Instinct (ROCm)"),
    (r"gaudi|habana|^hl-?\d|^intel|ponte-?vecchio|^pvc$|^max-?1[15]\d0$|^xpu$", "Intel Gaudi / Intel Data Center GPU"),
    (r"tpu|^v[2-7][ep]?$|trillium|ironwood", "Google TPU"),
    (r"trainium|inferentia|^trn\d|^inf\d", "AWS Trainium / Inferentia"),
    (r"^apple|^m[1-5](-(pro|max|ultra))?$|^mps$|^metal$", "Apple silicon (MPS)"),
    (r"ascend|^910[a-c]?$|^npu$", "Huawei Ascend (NPU)"),
    (r"cambricon|^mlu\d*", "Cambricon MLU"),
    (r"hygon|^dcu$|^k100$", "Hygon DCU"),
    (r"cerebras|^wse|graphcore|^ipu$|groq|sambanova|tenstorrent", "a non-GPU AI accelerator"),
))
_CPU = re.compile(r"^(cpu|cpus|cpu-only|none|no-gpu|x86|x86_64|arm64|aarch64|grace)$")
# NVIDIA parts outside the planner's table (its figures are the SXM / NVL72 systems of hardware.yaml)
_NVIDIA = re.compile(
    r"^(nvidia-?)?(dgx-|hgx-)?(a100|a800|a10g?|a16|a30|a40|a2|a6000|l4|l20|l40s?|v100|p100|p40|t4|k80|h800|h20|"
    r"gh200|h100-(pcie|nvl)|h200-nvl|b100|gb10|dgx-spark|thor|jetson|rtx|quadro|titan|geforce|gtx)"
)


def check_gpu_type(value: str) -> None:
    """UserError (scope.gpu_*) for an accelerator outside the scope; nothing for a supported type,
    nor for a spelling this table does not know (get_hardware then lists the valid types)."""
    if gpu_type_or_none(value):
        return
    key = gpu_type_key(value)
    choices = ", ".join(GPU_TYPES)
    vendor = next((label for pattern, label in _OTHER_VENDORS if pattern.search(key)), None)
    if vendor:
        raise UserError("scope.gpu_vendor", field="--gpu-type", value=value, vendor=vendor, choices=choices)
    if _CPU.match(key):
        raise UserError("scope.gpu_cpu", field="--gpu-type", value=value, choices=choices)
    if key in RUBIN:
        raise UserError("scope.gpu_no_figures", field="--gpu-type", value=value, choices=choices)
    if _NVIDIA.match(key):
        raise UserError("scope.gpu_nvidia", field="--gpu-type", value=value, choices=choices)


# --- schedulers ---------------------------------------------------------------------------------------
_OTHER_SCHEDULERS = {
    **dict.fromkeys(("kubernetes", "k8s", "kube", "kueue", "volcano", "kubeflow"), "Kubernetes"),
    **dict.fromkeys(("pbs", "pbspro", "pbs-pro", "openpbs", "torque"), "PBS / Torque"),
    "lsf": "IBM Spectrum LSF",
    **dict.fromkeys(("sge", "uge", "gridengine", "grid-engine", "oge"), "Grid Engine"),
    **dict.fromkeys(("htcondor", "condor"), "HTCondor"),
    "flux": "Flux", "ray": "Ray", "skypilot": "SkyPilot", "lepton": "Lepton", "dgxcloud": "DGX Cloud",
    **dict.fromkeys(("awsbatch", "aws-batch", "batch"), "AWS Batch"),
    **dict.fromkeys(("local", "none", "bare", "ssh", "torchrun", "docker"), "local"),
}


def check_scheduler(value: str) -> str:
    """The scheduler's canonical name ('slurm'); UserError for any other."""
    key = gpu_type_key(value)
    if key in SCHEDULERS:
        return key
    choices = ", ".join(SCHEDULERS)
    label = _OTHER_SCHEDULERS.get(key)
    if label == "local":
        raise UserError("scope.scheduler_local", field="--scheduler", value=value, choices=choices)
    if label:
        raise UserError("scope.scheduler", field="--scheduler", value=value, scheduler=label, choices=choices)
    raise UserError("arg.choice", flag="--scheduler", value=value, choices=choices)


def scheduler_hint(environ: Mapping[str, str] | None = None) -> Msg | None:
    """A hint (never an error) when this looks like a Kubernetes pod with no Slurm to submit to."""
    env = os.environ if environ is None else environ
    if not env.get("KUBERNETES_SERVICE_HOST"):
        return None
    if any(k.startswith("SLURM_") for k in env) or shutil.which("sbatch", path=env.get("PATH")):
        return None
    return msg("scope.hint.kubernetes")


# --- models -------------------------------------------------------------------------------------------
# model kind -> (pattern on the lower-case name or HF id, HF config model_types); checked only for
# names the catalog does not resolve, so a recipe model never matches
_MODEL_KINDS: dict[str, tuple[re.Pattern[str], frozenset[str]]] = {
    "encoder_only": (
        re.compile(r"bert|roberta|deberta|electra|mpnet|minilm|(^|[/_-])(bge|e5|gte)-"),
        frozenset({"bert", "roberta", "deberta", "deberta-v2", "distilbert", "electra", "albert", "xlm-roberta",
                   "modernbert", "camembert", "mpnet", "nomic_bert", "xlm"}),
    ),
    "encoder_decoder": (
        re.compile(r"(^|[^a-z0-9])(flan-?|m|u|long|byt)?t5([^a-z0-9]|$)|(^|[^a-z])m?bart([^a-z]|$)|pegasus|"
                   r"opus-mt|marian|whisper|nllb|m2m100|(^|[/_-])switch-(base|large|c)"),
        frozenset({"t5", "mt5", "umt5", "longt5", "bart", "mbart", "pegasus", "marian", "whisper", "m2m_100",
                   "nllb-moe", "switch_transformers", "t5gemma", "led", "prophetnet", "bigbird_pegasus"}),
    ),
    "ssm_only": (
        re.compile(r"mamba|rwkv|xlstm"),
        frozenset({"mamba", "mamba2", "falcon_mamba", "rwkv", "rwkv5", "rwkv6", "xlstm"}),
    ),
    "diffusion": (
        re.compile(r"diffusion|sdxl|(^|[/_-])sd-?(turbo|xl|3|2|1\.5)|(^|[/_-])unet|pixart|kandinsky|deepfloyd|"
                   r"playground-v|hunyuan-?(dit|video)|cogvideo|ltx-video|mochi"),
        frozenset(),  # diffusers configs carry _class_name, not model_type
    ),
}
# Catalog families of Megatron Bridge's diffusion recipes (recipes/flux, recipes/wan in 0.6.2)
DIFFUSION_FAMILIES = ("flux", "wan")


def model_kind(name: str) -> str | None:
    """The out-of-scope kind a model name or HF id belongs to, else None."""
    text = name.strip().lower()
    return next((kind for kind, (pattern, _) in _MODEL_KINDS.items() if pattern.search(text)), None)


def config_kind(model_type: str) -> str | None:
    """The out-of-scope kind of an HF config's model_type, else None."""
    key = model_type.strip().lower()
    return next((kind for kind, (_, types) in _MODEL_KINDS.items() if key in types), None)


def check_model(model: str, hf_config: str | None = None, catalog_version: str | None = None) -> None:
    """UserError (scope.model) for a model kind no Megatron Bridge recipe or bridge covers."""
    from mbridge_launch.knowledge.catalog import load_catalog

    if hf_config:
        from mbridge_launch.knowledge.hf_config import hf_model_type

        model_type = hf_model_type(hf_config)
        kind = config_kind(model_type) if model_type else None
        if kind:
            raise _model_error("--hf-config", f"{hf_config} (model_type {model_type})", kind,
                               load_catalog(catalog_version))
        if model_type:
            return  # the config, not the name, says what is planned (hf_config_check.py)
    if _resolves(model):
        return
    kind = model_kind(model)
    if kind:
        raise _model_error("--model", model, kind, load_catalog(catalog_version))


def _resolves(model: str) -> bool:
    """Whether the catalog knows the name; a failure other than 'unknown' is left to recommend."""
    from mbridge_launch.knowledge.models import UNKNOWN_MODEL_KEYS, resolve_model

    try:
        resolve_model(model)
    except UserError as exc:
        return exc.key not in UNKNOWN_MODEL_KEYS
    return True


def _model_error(field: str, value: str, kind: str, catalog: Any) -> UserError:
    families = sorted({r.family for r in catalog.recipes if r.family})
    diffusion = ", ".join(f for f in DIFFUSION_FAMILIES if f in families) or "-"
    what = msg("scope.model.diffusion", diffusion=diffusion) if kind == "diffusion" else msg(f"scope.model.{kind}")
    return UserError("scope.model", field=field, value=value, kind=what, version=catalog.version,
                     choices=", ".join(families))


def check_request(request: Any) -> None:
    """Every scope check of a recommend request (the scheduler is checked when parsed)."""
    check_gpu_type(request.gpu_type)
    check_model(request.model, request.hf_config, request.catalog_version)
