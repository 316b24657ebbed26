"""GLM-5.2 pretraining on 352 H100: the memory model against the reported peak (issue 34).

    python benchmarks/glm52_352_memory.py

The report: measured runs peaked at 65 GiB allocated (torch's max allocated) where the model said
40 GiB. The run's layout is not published and no 0.6.2 recipe has 352 GPUs, so this estimates
reconstructions: the 416-GPU H100 recipe (TP1 PP13 VP2 EP32, MBS1 GBS1024 seq 4096, full recompute,
bf16 gradients, its pipeline layout and settings) resized to 352 = 11 pipeline ranks x 32 (EP32 with
DP32, or PP22 with EP16), each with a layout that keeps GLM-5.2's four-layer DSA index-sharing groups
whole (Megatron rejects a chunk that starts on a layer reusing another chunk's top-k). "allocated"
is the estimate without the allowance (CUDA context, NCCL, fragmentation) and the DeepEP buffers,
which torch's allocator does not count. Run it on a checkout before and after a memory change to
compare.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for path in (str(ROOT), str(ROOT / "benchmarks")):
    if path not in sys.path:
        sys.path.insert(0, path)

from mbridge_launch.knowledge.models import load_arch  # noqa: E402
from mbridge_launch.planner.memory import estimate_memory  # noqa: E402
from mbridge_launch.planner.rules import evolve  # noqa: E402
from recipe_memory import library_recipes, recipe_layout  # noqa: E402

MEASURED_ALLOCATED_GIB = 65.0  # the figure


def layouts() -> dict[str, object]:
    recipe = next(r for r in library_recipes() if r.name == "glm52_pretrain_416gpu_h100_bf16_config")
    base = recipe_layout(recipe)

    def chunks(stages: list[str], **changes: object) -> object:
        return evolve(base, split=dataclasses.replace(base.split, stages=tuple(stages)), **changes)

    return {
        "416 recipe as shipped (PP13 VP2 EP32)": base,
        "R1 PP11 VP2 EP32 Et|t||tttt*18|ttttmL": chunks(["Et", "t", ""] + ["tttt"] * 18 + ["ttttmL"], pp=11, world=352),
        "R2 PP11 VP2 EP32 Et|t|tttt*8||tttt*10|ttttmL": chunks(["Et", "t"] + ["tttt"] * 8 + [""] + ["tttt"] * 10
                                                              + ["ttttmL"], pp=11, world=352),
        "R3 PP22 EP16 Et|t|tttt*19|mL": chunks(["Et", "t"] + ["tttt"] * 19 + ["mL"], pp=22, vp=None, ep=16, world=352),
        "R4 PP11 EP32 Etttttt|tttt*2|tttttttt*7|ttttmL": chunks(["Etttttt", "tttt", "tttt"] + ["tttttttt"] * 7
                                                                 + ["ttttmL"], pp=11, vp=None, world=352),
    }


def main() -> int:
    arch = load_arch("glm52")
    print("| layout | stage | weights | grads | optimizer | activations | logits | total | allocated | vs 65 GiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, layout in layouts().items():
        m = estimate_memory(arch, layout, 80.0, grad_bytes=2.0)
        allocated = m.total - m.allowance - m.dispatcher
        error = allocated / MEASURED_ALLOCATED_GIB - 1
        cell = name.replace("|", "\\|")
        print(f"| {cell} | {m.stage} | {m.weights:.1f} | {m.gradients:.1f} | {m.optimizer:.1f} | {m.activations:.1f} | "
              f"{m.logits:.1f} | {m.total:.1f} | {allocated:.1f} | {error:+.0%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
