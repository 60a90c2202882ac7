"""Fine-tuning tasks: GLUE (a table of specs), your own CSV/TSV/JSONL data, RACE / multiple choice.

Every task follows `albert.tasks.base.Task`: it reads its data, featurizes it with the tokenizer, names
its head and loss, and turns predictions into metrics. Training goes through the one trainer
(`albert.train`); evaluation takes a predict function.
"""
