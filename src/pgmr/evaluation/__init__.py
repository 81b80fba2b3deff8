"""Measuring pgmr: oracle resolution, distractors, refusal (and, later, generation metrics)."""
