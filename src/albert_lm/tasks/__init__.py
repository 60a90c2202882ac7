"""Fine-tuning tasks: GLUE (a table of specs), your own CSV/TSV/JSONL data, RACE / multiple choice, SQuAD,
named entities (CoNLL).

Every task is one `albert_lm.tasks.base.Task` class: it reads its data, featurizes it with the tokenizer, names
its head and outputs, turns predictions into metrics, rebuilds itself from a fine-tuned model's task.json
(`albert_lm.tasks.rundir`), and declares its serve request fields and command line; `albert_lm.tasks.registry`
is the one table of them. Training goes through the one trainer (`albert_lm.tasks.finetune`, `albert_lm.train`);
evaluation takes a predict function.
"""
