"""Preflight: prove a Plan can run before a GPU-hour is spent.

`runner.run_preflight(plan, *, cluster=True, on_nodes=False) -> model.Report`. Check codes and
their texts are in the message catalog (mbridge_launch/messages), under `preflight.`/`plan.`/...
"""
