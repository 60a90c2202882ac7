"""The one table of fine-tuning task kinds, and the tables the rest of the package derives from it.

Each task is one class (`albert_lm.tasks.base.Task`) that says everything about itself: its head and the
outputs its post-processing reads (`Task.head_outputs`), the serve request fields it takes
(`Task.request_fields`), how it reads a labelled file (`Task.read_labelled`), its command-line arguments
(`Task.cli_arguments`, `Task.cli_task`) and the task.json kinds it rebuilds itself from (`Task.kinds`,
`Task.from_info`). `TASKS` lists them by command; everything else is derived here:

* `KINDS`: task.json kind -> the class whose `from_info` rebuilds it (`albert_lm.finetune.rundir`);
* `HEAD_OUTPUTS`: head name -> graph outputs (`albert_lm.infer.graph`, beside the heads no task has);
* `READERS`: task.json kind -> the class that reads its labelled files (`albert export onnx --calibrate-on`);
* `task_class`: the class of a task.json.

Adding a task kind is one class and one line in `TASKS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from albert_lm.tasks.base import ModelDirError, Task
from albert_lm.tasks.custom import CustomTask
from albert_lm.tasks.glue import GlueTask
from albert_lm.tasks.ner import TokenClassificationTask
from albert_lm.tasks.race import MultipleChoiceTask
from albert_lm.tasks.squad import SquadTask

TASKS: dict[str, type[Task]] = {
    "glue": GlueTask,
    "custom": CustomTask,
    "race": MultipleChoiceTask,
    "squad": SquadTask,
    "ner": TokenClassificationTask,
}
"""Command (``albert finetune NAME``, ``albert evaluate NAME``) -> task class."""


def _rebuilder(cls: type[Task]) -> type[Task]:
    """The class that defines ``cls``'s `from_info` (GLUE and custom data: `ClassificationTask`, whose
    task.json needs neither a GLUE directory nor the training file)."""
    return next(c for c in cls.__mro__ if "from_info" in vars(c))


KINDS: dict[str, type[Task]] = {kind: _rebuilder(cls) for cls in TASKS.values() for kind in cls.kinds}
"""Task kind (``Task.kind``, saved in task.json) -> the class that rebuilds the task from task.json."""

READERS: dict[str, type[Task]] = {
    kind: next(c for c in cls.__mro__ if "read_labelled" in vars(c))
    for cls in TASKS.values()
    for kind in cls.kinds
}
"""Task kind -> the class whose `Task.read_labelled` reads its labelled files (classification and
regression, GLUE models too: custom data's CSV / TSV / JSONL columns)."""

HEAD_OUTPUTS: dict[str | None, tuple[str, ...]] = {
    head: outputs for cls in TASKS.values() for head, outputs in cls.head_outputs.items()
}
"""Head name (`albert_lm.model.HEADS`) of a task model -> the outputs its task's post-processing reads."""


def task_class(info: Mapping[str, Any], source: Any = "task.json") -> type[Task]:
    """The task class of a fine-tuned model's task.json (``info``; ``source`` names it in errors).

    Raises:
        ModelDirError: an unknown kind.
    """
    kind = info.get("kind")
    if kind not in KINDS:
        raise ModelDirError(f"{source}: unknown task kind {kind!r}; known: {', '.join(KINDS)}")
    return KINDS[str(kind)]
