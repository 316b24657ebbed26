"""The one Slurm command layer (commands.py): below preflight, runs, the gate and the executors,
so each of them reads the scheduler through the same typed calls and none imports another stage
to do it."""
