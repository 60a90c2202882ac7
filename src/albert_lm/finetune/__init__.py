"""The fine-tuning workflow for any registered task kind: `config` (`FinetuneConfig`: fine-tuning's values of
the shared settings), `rundir` (run directories, task.json, reading a fine-tuned model back), `resume` (what a
resumed run must share with the run it continues) and `run` (`finetune`: data, model, the one trainer, dev
evaluation, the report).
"""
