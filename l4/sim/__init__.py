"""The job simulator: failed jobs and healthy baselines with ground truth (``l4 simulate``).

Kept apart from the engine: nothing in the diagnosis imports it.  Its message tables come
from real public failure reports; its figures are development aids, not the truth (the
real-run benchmark, ``benchmarks/realruns/``, is).
"""
