"""Foreign checkpoints: name tables (keymap), Hugging Face model directories (hf), TF1 checkpoints (tf)."""
