"""mbridge-launch: recommend, plan, preflight and launch Megatron Bridge training on Slurm."""

__version__ = "0.1.0"
