"""What the experiments share: the shared data's locations, held-out detection, budgets at equal FLOPs,
pre-training to budget points, fine-tuning evaluations and their cache."""
