"""What a pre-training run resumes from: checkpoints and the manager that saves and restores every stateful
part, the data position, the RNGs, the run directory, the stop signals and the ranks of a distributed run."""
