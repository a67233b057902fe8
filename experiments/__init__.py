"""Research experiments: what pre-training and the recipes achieve, measured (experiments/README.md).

Each experiment is a script run as `python -m experiments.NAME` from the repository root, writing its results
to experiments/results/; the pieces they share live in experiments.lib. No script imports another script.
"""
