"""What the vectors mean: layer sweeps, contextuality, probes, CKA, model diffs, static kinds,
distillation."""
