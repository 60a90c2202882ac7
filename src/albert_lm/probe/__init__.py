"""Frozen-encoder probes: logistic regression on a model's features (`run`) and the verdict against random
initialization (`verdict`)."""
