"""The pretraining workflow: a recipe and a data directory -> a model directory. `config` (`PretrainConfig`,
the recipes), `init` (continued pretraining from a model directory), `run` (the run directory, the one trainer,
the final model) and `health` (the watch for plateaus, collapse and spikes while it runs).
"""
