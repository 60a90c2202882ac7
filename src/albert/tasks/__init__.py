"""Fine-tuning tasks: GLUE (a table of specs), your own CSV/TSV/JSONL data, RACE / multiple choice, SQuAD.

Every task follows `albert.tasks.base.Task`: it reads its data, featurizes it with the tokenizer, names
its head and loss, turns predictions into metrics, and rebuilds itself from a fine-tuned model's task.json
(`albert.tasks.rundir`). Training goes through the one trainer (`albert.tasks.finetune`, `albert.train`);
evaluation takes a predict function.
"""
