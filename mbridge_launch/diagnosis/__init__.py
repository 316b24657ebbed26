"""Why a job died: the first failure in Slurm's view and the logs, its cause, evidence, fix and whether a retry helps.

Public API: `classify.diagnose(logs, slurm=None, *, plan=None, max_bytes=None) -> model.Diagnosis`
(pure: the logs are read as streams, Slurm's view is passed in as a `model.SlurmView`).
Modules: model (the data), patterns (the one table of messages -> causes), noise (what is never
evidence), scan (the bounded-memory reader), fixes (a fix per cause, the memory model's for an
OOM), classify (the first root cause by time, then Slurm's view, then symptoms).
"""
