"""Stand-in for Megatron Bridge's scripts/training/run_recipe.py, for tests on a GPU-less cluster.

It accepts run_recipe.py's command line, derives the distributed environment the way Bridge does
under srun (or torchrun), logs iterations in Megatron's format, writes and resumes checkpoints in
Megatron's on-disk layout and can be told by environment variables to crash, emit NaN or a loss
spike, or run slowly. Pure standard library; nothing is trained. See tests/standin/README.md.
"""
