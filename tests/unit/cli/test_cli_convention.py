"""One CLI convention (docs/cli.md), pinned: every parser of `albert` is walked, and the same concept has
the same flag everywhere; an old spelling is a deprecated alias that still works and prints one line."""

from __future__ import annotations

import argparse

import pytest
from cli_parsers import all_parsers

from albert_lm.tasks.registry import TASKS  # noqa: E402

PARSERS = {p.name: p for p in all_parsers() if p.is_leaf()}
# every registered task kind has both commands: the lists come from the registry, not from this file
FINETUNE = [f"finetune {t}" for t in TASKS]
EVALUATE = [f"evaluate {t}" for t in TASKS]

# concept -> (the flag, spellings it replaced or that would split it, the commands that must have it)
CONCEPTS: dict[str, tuple[str, set[str], list[str]]] = {
    "output": ("--output", {"--run-dir", "--out", "--output-dir", "--save-dir"},
               ["tokenizer train", "prepare", "pretrain", "plot", "convert tf", *FINETUNE, *EVALUATE, "probe",
                "predict", "export onnx", "export sentence-transformers"]),
    "model input": ("--model", {"--init", "--model-dir", "--model-path"},
                    ["pretrain", *FINETUNE, *EVALUATE, "probe", "predict", "export onnx",
                     "export sentence-transformers", "serve"]),
    "data directory": ("--data-dir", {"--data", "--data_dir"}, ["pretrain", "finetune glue", "finetune race"]),
    "labelled files": ("--train", {"--train-file", "--train-data"},
                       ["finetune custom", "finetune race", "finetune squad", "probe"]),
    "sequence length": ("--max-seq-length", {"--max-length", "--seq-length", "--max-seq-len", "--max-len"},
                        ["prepare", "pretrain", *FINETUNE, *EVALUATE, "probe", "predict",
                         "export sentence-transformers", "serve", "tokenizer encode"]),
    "learning rate": ("--learning-rate", {"--lr", "--learning_rate"}, ["pretrain", *FINETUNE]),
    "seed": ("--seed", {"--random-seed", "--rng-seed"},
             ["tokenizer train", "prepare", "pretrain", *FINETUNE, "probe", "data cues"]),
    "time budget": ("--max-time-minutes", {"--max-time", "--time-limit", "--max-minutes"}, ["pretrain", *FINETUNE]),
    "device": ("--device", {"--gpu", "--cuda", "--no-cuda"}, ["pretrain", *FINETUNE, *EVALUATE, "predict", "serve"]),
    "inference backend": ("--backend", {"--runtime", "--engine"}, [*EVALUATE, "predict", "serve"]),
    "progress": ("--progress", {"--quiet", "--progress-bar"}, ["tokenizer train", "pretrain", *FINETUNE]),
    "json output": ("--json", {"--as-json", "--print-json"},
                    ["params", "data stats", "data cues", "convert tf", "probe", "export onnx",
                     "export sentence-transformers"]),
    # a command that writes a directory refuses a non-empty one unless told
    "overwrite": ("--overwrite", {"--force", "--replace", "--clobber"},
                  ["tokenizer train", "prepare", "pretrain", "convert tf", *FINETUNE, "export onnx",
                   "export sentence-transformers"]),
}  # fmt: skip


def test_the_walk_sees_every_command() -> None:
    from albert_lm.cli.main import COMMANDS

    assert {name.split()[1] for name in PARSERS} == set(COMMANDS)
    assert len(PARSERS) >= 20 and sum(len(p.options()) for p in PARSERS.values()) > 300


def test_one_way_to_run_a_command() -> None:
    """Each leaf (sub)command's own parser says what runs it (`albert_lm.cli.options.runs`: ``_run``), and
    nothing else does: no parent's default for the same dest (argparse's precedence between the two has
    changed between releases, bpo-45235), no subcommand dest a command dispatches on, no other function
    passed through the namespace (``_convert_run``, ``_usage_error``: a second mechanism)."""
    import importlib

    from albert_lm.cli.main import COMMANDS, build_parser
    from albert_lm.cli.options import RUN

    top = build_parser()
    assert RUN not in top._defaults
    assert [a.dest for a in top._actions if isinstance(a, argparse._SubParsersAction)] == ["command"]
    for p in all_parsers():
        defaults = p.parser._defaults
        functions = [k for k, v in defaults.items() if callable(v) and k != RUN]
        assert not functions, f"{p.name}: functions passed as defaults {functions}; use options.runs"
        if p.is_leaf():
            assert callable(defaults.get(RUN)), f"{p.name}: a leaf that sets no {RUN} (options.runs)"
        else:
            assert RUN not in defaults, f"{p.name}: {RUN} on a parent; set it on each leaf"
            dests = [a.dest for a in p.parser._actions if isinstance(a, argparse._SubParsersAction)]
            assert dests == [argparse.SUPPRESS], f"{p.name}: a subcommand dest {dests}; use add_subcommands"
        if len(p.path) == 1:  # a module with subcommands has no `run` to dispatch with
            assert hasattr(importlib.import_module(COMMANDS[p.path[0]]), "run") == p.is_leaf(), p.name


def test_the_leaf_given_runs() -> None:
    from albert_lm.cli import data
    from albert_lm.cli.main import build_parser

    parser = build_parser("data")
    for name, run in [("stats", data._stats), ("cues", data._cues), ("verify", data._verify)]:
        args = parser.parse_args(["data", name, "D", *(["E"] if name == "cues" else [])])
        assert args._run is run and not hasattr(args, "data_command")


@pytest.mark.parametrize(
    ("command", "metavar"),
    [("convert", "SOURCE"), ("tokenizer", "SUBCOMMAND"), ("data", "SUBCOMMAND"), ("export", "FORMAT"),
     ("finetune", "TASK"), ("evaluate", "TASK")],
)  # fmt: skip
def test_a_missing_subcommand_is_a_usage_error(capsys, command: str, metavar: str) -> None:
    from albert_lm.cli.main import main

    with pytest.raises(SystemExit) as e:
        main([command])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: albert {command} [-h] {metavar} ...")
    assert err.endswith(f"albert {command}: error: the following arguments are required: {metavar}\n")


def test_a_usage_error_beyond_argparse_goes_through_main(capsys, tmp_path) -> None:
    from albert_lm.cli.main import main

    with pytest.raises(SystemExit) as e:  # prepare: --merge, or all of --input --tokenizer --output
        main(["prepare", "--input", "x.txt", "--output", str(tmp_path / "o")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: albert prepare ")
    assert err.endswith("albert prepare: error: missing --tokenizer (or --merge DATA_DIR)\n")


@pytest.mark.parametrize("concept", CONCEPTS)
def test_one_flag_per_concept(concept: str) -> None:
    flag, others, commands = CONCEPTS[concept]
    missing = [c for c in commands if flag not in PARSERS[f"albert {c}"].options()]
    assert not missing, f"{concept}: {flag} missing in {missing}"
    for p in PARSERS.values():
        options = p.options()
        for other in others & set(options):  # another spelling: only as a deprecated alias of the flag
            action = options[other]
            assert flag in action.option_strings or action.help == argparse.SUPPRESS, (p.name, other)
            assert other in getattr(action, "deprecated", ()) or action.help == argparse.SUPPRESS, (
                p.name,
                other,
            )


def test_durations_name_their_unit() -> None:
    """Minutes in pretrain and seconds in finetune was one trap: every time flag says its unit."""
    units = ("-minutes", "-s", "-ms")
    for p in PARSERS.values():
        for flag, action in p.options().items():
            if action.help == argparse.SUPPRESS or not flag.startswith("--"):
                continue
            if any(w in flag for w in ("time", "timeout", "wait")) and not flag.replace("_", "-").endswith(
                units
            ):
                pytest.fail(f"{p.name} {flag}: a duration without its unit")


def test_one_device_default() -> None:
    for name in ["pretrain", *FINETUNE, *EVALUATE, "predict", "serve"]:
        action = PARSERS[f"albert {name}"].options()["--device"]
        # SUPPRESS: a settings-dataclass flag, whose default (None) is the field's
        assert action.default in (None, argparse.SUPPRESS) and "a GPU when there is one" in action.help, name


def test_one_backend_default() -> None:
    """The inference flags are one dataclass's fields (`InferenceSettings`): one default, one choice list."""
    from albert_lm.infer.settings import BACKENDS, InferenceSettings

    assert InferenceSettings().backend == "auto" and BACKENDS == ("auto", "torch", "onnx")
    for name in [*EVALUATE, "predict", "serve"]:
        action = PARSERS[f"albert {name}"].options()["--backend"]
        assert action.dest == "backend" and list(action.choices) == list(BACKENDS), name


def test_the_inference_batch_is_eval_batch_size() -> None:
    """A forward batch is --eval-batch-size in evaluate and predict, as in fine-tuning's dev evaluation (its
    old --batch-size there, an optimizer step's batch in finetune, is a deprecated spelling), with one
    default, fine-tuning's run.eval_batch_size."""
    from albert_lm.infer.settings import InferenceSettings
    from albert_lm.train.settings import RunSettings

    assert InferenceSettings().eval_batch_size == RunSettings().eval_batch_size == 64
    for name in [*EVALUATE, "predict"]:
        action = PARSERS[f"albert {name}"].options()["--eval-batch-size"]
        assert action.dest == "eval_batch_size" and "--batch-size" in getattr(action, "deprecated", ()), name


def test_no_positional_model_or_output() -> None:
    """Positionals only for what a command inspects (plot RUN_DIR, data stats DATA_DIR, a checkpoint to
    convert); the model and the output are flags (kept positionally for a release, hidden)."""
    for p in PARSERS.values():
        for action in p.parser._actions:
            if not action.option_strings and action.dest in ("model", "output", "model_positional",
                                                             "output_positional"):  # fmt: skip
                assert action.help == argparse.SUPPRESS, (p.name, action.dest)


def test_an_old_spelling_works_and_says_so_once(capsys, caplog, tmp_path) -> None:
    import logging

    from albert_lm.cli.main import main

    def warned() -> list[str]:
        out = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        caplog.clear()
        return out

    assert main(["pretrain", "--recipe", "smoke", "--run-dir", str(tmp_path / "r"), "--init", "M",
                 "--print-config"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert warned() == ["--run-dir is deprecated; use --output", "--init is deprecated; use --model"]
    assert f"output: {tmp_path / 'r'}\n" in out and "init_from: M\n" in out
    argv = ["finetune", "glue", "--task", "sst2", "--data-dir", "G", "--output", str(tmp_path / "o"),
            "--print-config", "--seed", "7"]  # fmt: skip
    assert main([*argv, "--init", "M"]) == 0
    old_out = capsys.readouterr().out
    assert warned() == ["--init is deprecated; use --model"]
    assert main([*argv, "--model", "M"]) == 0
    new_out = capsys.readouterr().out
    assert warned() == [] and new_out == old_out and "seed: 7" in new_out


def test_set_is_repeatable_in_pretrain_and_params(capsys) -> None:
    from albert_lm.cli.main import main

    assert main(["pretrain", "--recipe", "smoke", "--set", "optim.learning_rate=0.5", "--set", "run.seed=3",
                 "run.log_every=4", "--print-config"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "learning_rate: 0.5" in out and "seed: 3" in out and "log_every: 4" in out


def test_none_is_a_value_where_the_field_takes_the_word(capsys) -> None:
    """``sharing=none`` is the paper's not-shared setting (it was read as null and refused); ``none`` still means
    null for an optional number, and a file's ``sharing: none`` reads the same as the flag."""
    from albert_lm._fields import coerce
    from albert_lm.cli.main import main
    from albert_lm.train.settings import parse_yaml

    assert main(["params", "--preset", "albert-small", "--set", "sharing=none"]) == 0
    shared = capsys.readouterr().out
    assert main(["params", "--preset", "albert-small"]) == 0
    assert float(shared.split(":")[1].rstrip("M\n")) > float(
        capsys.readouterr().out.split(":")[1].rstrip("M\n")
    )
    assert main(["pretrain", "--recipe", "smoke", "--set", 'model.overrides={"sharing": "none"}',
                 "--set", "run.max_steps=none", "--print-config"]) == 0  # fmt: skip
    assert "    sharing: none\n" in capsys.readouterr().out
    assert parse_yaml("model:\n  sharing: none\n", "x.yaml") == {"model": {"sharing": "none"}}
    assert coerce("none", int | None, "run.max_steps") is None
    assert coerce("none", str, "model.sharing") == "none"


def test_serve_errors_go_through_main(capsys, tmp_path) -> None:
    from albert_lm.cli.main import main

    assert main(["serve", "--model", str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("albert serve: error: ") and err.count("\n") == 1 and str(tmp_path) in err
    assert main(["serve"]) == 1
    assert capsys.readouterr().err == "albert serve: error: --model MODEL_DIR is required\n"


def test_the_task_commands_are_the_registry() -> None:
    """Each registered kind is a `finetune` and an `evaluate` subcommand, and no other subcommand exists."""
    assert {n.removeprefix("albert ") for n in PARSERS if n.startswith("albert finetune ")} == set(FINETUNE)
    assert {n.removeprefix("albert ") for n in PARSERS if n.startswith("albert evaluate ")} == set(EVALUATE)
    assert "finetune ner" in FINETUNE  # the kind the hand-written lists had missed


def test_resume_is_the_same_flag_in_pretrain_and_finetune(tmp_path, capsys) -> None:
    """``--resume [RUN_DIR]`` in both workflows: a switch that continues --output, or the run directory
    itself; finetune needs one of --output / --resume RUN_DIR, and refuses two different ones."""
    from albert_lm.cli.main import main

    for name in ["pretrain", *FINETUNE]:
        action = PARSERS[f"albert {name}"].options()["--resume"]
        assert action.nargs == "?" and action.const is True and action.metavar == "RUN_DIR", name
    base = ["finetune", "custom", "--model", str(tmp_path / "m"), "--train", str(tmp_path / "t.csv")]
    assert main(base) == 1
    assert "--output: the run directory is required (or --resume RUN_DIR" in capsys.readouterr().err
    assert main([*base, "--output", str(tmp_path / "a"), "--resume", str(tmp_path / "b")]) == 1
    assert "two run directories; give one" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
