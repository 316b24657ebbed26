"""The node check: before training starts, every node proves it has the GPU count and type the
Plan expects, and the job fails fast with "expected ... found ..." per node otherwise.

It is the first step of every rendered job and can be rendered alone (`batch_script.node_check_script`) so that
`preflight --on-nodes` submits just that step. The bash program is a code constant; the expected
values and the (translated) message templates reach it as positional arguments, never as shell
text, so nothing a Plan holds is ever parsed by the shell.
"""

from __future__ import annotations

from mbridge_launch.base.i18n import t
from mbridge_launch.base.quoting import ShellExpr, ShellValue, sh, sh_join
from mbridge_launch.knowledge.vocabulary import gpu_type_or_none
from mbridge_launch.plan.model import Plan

# Arguments: EXPECTED_COUNT EXPECTED_TYPE OK_TEMPLATE MISMATCH_TEMPLATE UNKNOWN_TYPE_TEMPLATE.
# Templates use {node} {expected_count} {expected_type} {found_count} {found_type} {source}.
# Count: `nvidia-smi -L` where present, else SLURM_GPUS_ON_NODE. Type: the nvidia-smi name must
# contain the expected type as a word ("NVIDIA H100 80GB HBM3" is h100; "NVIDIA GB200" is not b200),
# else the GRES type from `scontrol show node`.
NODE_CHECK_PROGRAM = r"""expected_count=$1 expected_type=$2 ok_msg=$3 bad_msg=$4 unknown_msg=$5
node=${SLURMD_NODENAME:-$(hostname)}
want=$(printf '%s' "$expected_type" | tr '[:upper:]' '[:lower:]')
type_ok=0
if command -v nvidia-smi >/dev/null 2>&1; then
  source=nvidia-smi
  found_count=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ') || found_count=0
  names=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort -u)
  found_type=$(printf '%s' "$names" | tr '\n' '/')
  if [ -n "$names" ]; then
    type_ok=1
    while IFS= read -r name; do
      words=" $(printf '%s' "$name" | tr '[:upper:]' '[:lower:]' | tr -c 'a-z0-9' ' ') "
      case "$words" in *" $want "*) ;; *) type_ok=0 ;; esac
    done <<<"$names"
  fi
else
  source="SLURM_GPUS_ON_NODE, scontrol show node"
  found_count=${SLURM_GPUS_ON_NODE:-0}
  gres=$(scontrol show node "$node" 2>/dev/null | tr ' ' '\n' | sed -n 's/^Gres=//p' | head -n 1)
  found_type=$(printf '%s' "$gres" | tr ',' '\n' | sed -n 's/^gpu:\([^:(]*\):[0-9].*/\1/p' | head -n 1)
  if [ -z "$found_type" ]; then
    type_ok=unknown
  elif [ "$(printf '%s' "$found_type" | tr '[:upper:]' '[:lower:]')" = "$want" ]; then
    type_ok=1
  fi
fi
fill() {
  local m=$1
  m=${m//'{node}'/"$node"}
  m=${m//'{expected_count}'/"$expected_count"}
  m=${m//'{expected_type}'/"$expected_type"}
  m=${m//'{found_count}'/"$found_count"}
  m=${m//'{found_type}'/"${found_type:-?}"}
  m=${m//'{source}'/"$source"}
  printf 'mbridge-launch: %s\n' "$m"
}
if [ "$found_count" != "$expected_count" ] || [ "$type_ok" = 0 ]; then
  fill "$bad_msg" >&2
  exit 1
fi
if [ "$type_ok" = unknown ]; then
  fill "$unknown_msg"
else
  fill "$ok_msg"
fi
"""

_PLACEHOLDERS = {
    name: "{" + name + "}"
    for name in ("node", "expected_count", "expected_type", "found_count", "found_type", "source")
}
_HEREDOC_END = "MBRIDGE_NODE_CHECK"
_PROGRAM_VAR = ShellExpr('"$mbridge_node_check"')


def node_check_args(plan: Plan) -> list[str]:
    """Positional arguments of the program: expected count and type (canonical: a Plan's
    `dgx-h100` is the `h100` that nvidia-smi and GRES names contain), message templates."""
    c = plan.cluster
    return [
        str(c.gpus_per_node), gpu_type_or_none(c.gpu_type) or c.gpu_type,
        t("executors.node_check.ok", **_PLACEHOLDERS),
        t("executors.node_check.mismatch", **_PLACEHOLDERS),
        t("executors.node_check.type_unknown", **_PLACEHOLDERS),
    ]


def node_check_argv(plan: Plan) -> list[str]:
    """`bash -c PROGRAM mbridge-node-check ARGS...` as an argv (for runners without a shell)."""
    return ["bash", "-c", NODE_CHECK_PROGRAM, "mbridge-node-check", *node_check_args(plan)]


def node_check_srun_argv(plan: Plan) -> list[ShellValue]:
    """One task on every node of the allocation. --export=ALL because an sbatch --export list
    is inherited by srun steps inside the job (an sbatch --export=NONE would reach srun too)."""
    n = plan.cluster.nodes
    return [
        "srun", "--export=ALL", f"--nodes={n}", f"--ntasks={n}", "--ntasks-per-node=1",
        "bash", "-c", _PROGRAM_VAR, "mbridge-node-check", *node_check_args(plan),
    ]


def node_check_step(plan: Plan) -> str:
    """Shell lines running the check as the first step of a job: the program is a code constant
    in a quoted heredoc (read literally, nothing expanded); the job fails when any node differs
    from the plan, before the trainer starts."""
    if _HEREDOC_END in NODE_CHECK_PROGRAM:  # a code invariant, not a user error
        raise RuntimeError("node check program contains its heredoc delimiter")
    failed = sh("mbridge-launch: " + t("executors.node_check.failed"))
    passed = sh("mbridge-launch: " + t("executors.node_check.passed", count=plan.cluster.nodes))
    return (
        f"mbridge_node_check=$(cat <<'{_HEREDOC_END}'\n"
        f"{NODE_CHECK_PROGRAM}"
        f"{_HEREDOC_END}\n"
        f")\n"
        f"if ! {sh_join(node_check_srun_argv(plan))}; then\n"
        f"  echo {failed} >&2\n"
        f"  exit 1\n"
        f"fi\n"
        f"echo {passed}"
    )

