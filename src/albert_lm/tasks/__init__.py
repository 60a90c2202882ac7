"""Fine-tuning task kinds: GLUE (a table of specs), your own CSV/TSV/JSONL data, RACE / multiple choice, SQuAD,
named entities (CoNLL).

Every kind is one `albert_lm.tasks.base.Task` class: it reads its data, featurizes it with the tokenizer, names
its head and outputs, turns predictions into metrics, rebuilds itself from a fine-tuned model's task.json, and
declares its serve request fields, its command line and its hyperparameter preset (plain data over the flat
setting names); `albert_lm.tasks.registry` is the one table of them. `albert_lm.tasks.evaluate` runs a task's
metrics through a predict function; `inputs`, `collate`, `labels` and `metrics` are what the kinds share. The
workflows that use them live beside: `albert_lm.finetune`, `albert_lm.probe`, `albert_lm.infer`.
"""
