"""Judgements over a stored run, as data: each cell's status, fairness of a comparison, plausibility against
the roofline, bottleneck, 95 % intervals and verdicts. Reason codes and numbers, never sentences: report/
renders them in every language. Reads the store only (judge/views.py)."""
