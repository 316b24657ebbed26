"""The parallelism planner.

- rules.py       Layout, Violation, check_layout: Megatron Core's parallelism rules (one module for
                 recommend, plan, preflight and the catalog findings).
- memory.py      per-GPU memory by component against HBM with a headroom.
- flops.py       training FLOPs per token with Megatron Bridge's model-TFLOP/s accounting.
- throughput.py  step time, tokens/s/GPU, model TFLOP/s and MFU of a layout (calibrated constants).
- search.py      search(), estimate_layout(): called through entry.py only.
- entry.py       plan_request(), estimate_request(): the one entry point of plan, estimate, tune, recommend.
- report.py, inputs.py, plan_file.py   the `plan` / `estimate` commands' rendering and inputs.
Modules import lazily what they need; importing this package costs nothing.
"""
