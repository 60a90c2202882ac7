"""ALBERT in PyTorch."""
