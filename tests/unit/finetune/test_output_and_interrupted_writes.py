"""Issue 22 (part A): a relative --output that loaded another run's model, interrupted directory writes,
symlinked outputs, an output directory's lock, a run killed before its first checkpoint, and the errors
that were tracebacks or gave unsafe advice. Each test failed before its fix.

* item 1: report.json paths are relative to the run directory that holds them, never the cwd;
* items 8, 9, 12 and the lock: what a run leaves in its output directory;
* items 10, 11 and the rest: one line, never a traceback.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest
from standin_tokenizer import make_tiny_model_dir

from albert_lm.cli.main import main
from albert_lm.finetune.rundir import REPORT_FILE, resolve_model_dir
from conftest import FIXTURES

GLUE_DIR = FIXTURES / "glue"


@pytest.fixture(scope="module")
def init_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random albert-tiny model directory whose WordPiece vocab holds every word of the GLUE fixtures."""
    texts = [f.read_text(encoding="utf-8") for f in sorted(GLUE_DIR.rglob("*.tsv"))]
    return make_tiny_model_dir(tmp_path_factory.mktemp("init"), texts)


def _sst2_argv(init: Path, output: Path | str, *extra: str) -> list[str]:
    argv = ["finetune", "glue", "--task", "sst2", "--data-dir", str(GLUE_DIR), "--init", str(init)]
    argv += ["--output", str(output), "--train-steps", "2", "--eval-every", "1", "--batch-size", "3"]
    argv += ["--max-seq-length", "32", "--no-progress", "--no-test", "--precision", "fp32"]
    return [*argv, *extra]


def _err_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def _tuned(init: Path, out: Path) -> Path:
    """A fine-tuned SST-2 model directory as `albert finetune` writes one (random head, task.json)."""
    from albert_lm.finetune.rundir import write_task_info
    from albert_lm.tasks.classification import ClassificationTask

    shutil.copytree(init, out)
    task = ClassificationTask("sst2", lambda split: [], ["0", "1"], ["accuracy"])
    task.build_model(init).save_pretrained(out)
    write_task_info(task, out, {"max_seq_length": 32})
    return out


def _relabel(model_dir: Path, labels: list[str]) -> None:
    """Another model in effect: the same weights with other class names in its task.json."""
    info = json.loads((model_dir / "task.json").read_text())
    info["labels"] = labels
    (model_dir / "task.json").write_text(json.dumps(info))


# ------------------------------------------------------------------- item 1: a relative --output, another cwd
def test_a_relative_output_is_read_back_from_any_working_directory(
    init_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(_sst2_argv(init_dir, "ft1")) == 0
    report = json.loads((tmp_path / "ft1" / REPORT_FILE).read_text())
    assert report["checkpoints"]["best"]["dir"] == "checkpoints/best"  # relative to the run directory
    assert report["checkpoints"]["last"]["dir"] == "checkpoints/step-00000002"
    # another run of the same relative name under another working directory: a decoy
    other = tmp_path / "other"
    shutil.copytree(tmp_path / "ft1", other / "ft1")
    for which in ("best", "step-00000002"):
        _relabel(other / "ft1" / "checkpoints" / which, ["decoy-a", "decoy-b"])
    monkeypatch.chdir(other)
    run = tmp_path / "ft1"
    assert resolve_model_dir(run) == run / "checkpoints" / "best"
    assert resolve_model_dir(run, "last") == run / "checkpoints" / "step-00000002"
    capsys.readouterr()
    _stdin(monkeypatch, b"a sharp , smart film .\n")
    assert main(["predict", "--model", str(run)]) == 0
    (row,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert row["label"] in ("0", "1")  # SST-2's labels, not the decoy's


def test_a_report_of_the_old_layout_resolves_inside_its_run(tmp_path: Path, init_dir: Path) -> None:
    """Reports written before the fix hold ``--output``'s relative spelling (``ft1/checkpoints/best``);
    it means the run's own checkpoint, whatever the working directory holds under that name."""
    run = tmp_path / "ft1"
    (run / "checkpoints").mkdir(parents=True)
    shutil.copytree(init_dir, run / "checkpoints" / "best")
    report = {"checkpoints": {"best": {"dir": "ft1/checkpoints/best"}, "last": {"dir": "/elsewhere/step-9"}}}
    (run / REPORT_FILE).write_text(json.dumps(report))
    decoy = tmp_path / "cwd" / "ft1" / "checkpoints" / "best"
    shutil.copytree(init_dir, decoy)
    old = os.getcwd()
    os.chdir(tmp_path / "cwd")
    try:
        assert resolve_model_dir(run).resolve() == (run / "checkpoints" / "best").resolve()
        with pytest.raises(ValueError, match="with a last checkpoint"):
            resolve_model_dir(run, "last")  # absolute, outside the run, absent: not guessed
    finally:
        os.chdir(old)
    (run / REPORT_FILE).write_text('{"checkpoints": []}')
    with pytest.raises(ValueError, match="not a report of `albert finetune`"):
        resolve_model_dir(run)


# ------------------------------------------------------------- item 9: a kill between the two renames
# A process that dies right after moving the old directory aside (the first rename of an existing path):
# no except, no finally, no cleanup runs, as after a SIGKILL.
KILLED_BETWEEN_THE_RENAMES = """
import os, sys
from pathlib import Path
from albert_lm._io import atomic_write_dir
real = os.rename
def rename(src, dst):
    real(src, dst)
    if Path(dst).name.startswith(".tmp-old-"):
        os._exit(9)
os.rename = rename
atomic_write_dir(sys.argv[1], lambda d: (d / "config.json").write_text("new"))
"""


def _kill_between_the_renames(out: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", KILLED_BETWEEN_THE_RENAMES, str(out)], timeout=120)
    assert done.returncode == 9


def _write(d: Path, text: str) -> None:
    (d / "config.json").write_text(text)


@pytest.mark.parametrize("reader", ["write", "resolve", "export", "tokenizer", "convert"])
def test_a_write_killed_between_its_renames_is_recovered_by_the_next_run_or_reader(
    tmp_path: Path, reader: str
) -> None:
    from albert_lm._io import TMP_PREFIX, atomic_write_dir

    out = tmp_path / "model"
    atomic_write_dir(out, lambda d: _write(d, "old"))
    _kill_between_the_renames(out)
    assert not out.exists()  # the window: both copies complete, beside the path
    assert sorted(p.name.rpartition(".")[0] for p in tmp_path.iterdir()) == [
        ".tmp-new-model",
        ".tmp-old-model",
    ]
    if reader == "write":  # the next write finishes the interrupted one's job first, then its own
        atomic_write_dir(out, lambda d: _write(d, "newer"))
        assert (out / "config.json").read_text() == "newer"
    elif reader == "resolve":  # predict / evaluate / serve
        assert resolve_model_dir(out) == out and (out / "config.json").read_text() == "new"
    elif reader == "export":
        from albert_lm.export.pipeline import ExportError, check_output_dir

        with pytest.raises(ExportError, match="not empty"):  # the output is there again: no silent replace
            check_output_dir(out, overwrite=False)
    elif reader == "tokenizer":
        from albert_lm.tokenizer.train import check_output_dir as check_tokenizer_output

        with pytest.raises(FileExistsError, match="config.json"):
            check_tokenizer_output(out, overwrite=False)
    else:
        from albert_lm.convert.tf import convert_tf_checkpoint

        with pytest.raises(FileExistsError, match="not an empty directory"):
            convert_tf_checkpoint(tmp_path / "no-such-ckpt", out, {})
    assert out.is_dir() and not [p for p in tmp_path.iterdir() if p.name.startswith(TMP_PREFIX)]


def test_a_complete_checkpoint_beside_its_place_is_found_on_resume(tmp_path: Path) -> None:
    """A step checkpoint written as a new name: killed after its copy was complete, before it got its
    name; `latest_checkpoint` (every --resume) puts it in place rather than resuming from an older one."""
    from albert_lm.train.checkpoint import STATE_FILE, latest_checkpoint

    root = tmp_path / "checkpoints"
    for name in ("step-00000002", f".tmp-new-step-00000004.{2**22 + 7}"):  # a pid no process has
        (root / name).mkdir(parents=True)
        (root / name / STATE_FILE).write_text("{}")
    assert latest_checkpoint(tmp_path) == root / "step-00000004"


def test_a_live_writers_copies_are_left_alone(tmp_path: Path) -> None:
    from albert_lm._io import recover_dir

    part = tmp_path / f".tmp-part-model.{os.getppid()}"  # the parent process: alive
    part.mkdir()
    assert not recover_dir(tmp_path / "model") and part.is_dir()


# --------------------------------------------------------------------------- item 8: symlinked outputs
def test_a_directory_write_onto_a_symlink_replaces_its_target(tmp_path: Path) -> None:
    """`tokenizer train`, `convert` and `export` --overwrite write through `atomic_write_dir`: the link
    stays, its target holds the new content (it used to keep the old one, the link replaced by a copy)."""
    from albert_lm._io import atomic_write_dir

    target, link = tmp_path / "target", tmp_path / "link"
    atomic_write_dir(target, lambda d: _write(d, "old"))
    link.symlink_to(target)
    assert atomic_write_dir(link, lambda d: _write(d, "new")) == target
    assert link.is_symlink() and (target / "config.json").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "target"]


def test_finetune_overwrite_onto_a_symlink_replaces_the_run_it_points_to(
    init_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target, link = tmp_path / "runs" / "a", tmp_path / "latest"
    target.mkdir(parents=True)
    (target / "old-marker").write_text("old")
    link.symlink_to(target, target_is_directory=True)
    assert main(_sst2_argv(init_dir, link, "--overwrite")) == 0, capsys.readouterr().err
    assert link.is_symlink() and link.resolve() == target.resolve()
    assert (target / REPORT_FILE).is_file() and not (target / "old-marker").exists()
    assert resolve_model_dir(link) == link / "checkpoints" / "best"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "runs"]  # nothing left aside
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["a"]


# ---------------------------------------------------------------------------- the output directory's lock
# Another run holding OUTPUT/.lock, by the protocol itself (flock, its pid in the file), not through
# `lock_dir`, so that the test asks only what a second run does.
HOLD_THE_LOCK = """
import fcntl, os, sys, time
os.makedirs(sys.argv[1], exist_ok=True)
fd = os.open(os.path.join(sys.argv[1], ".lock"), os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, b"%d\\n" % os.getpid())
print("locked", flush=True)
time.sleep(120)
"""


def test_a_second_run_into_a_locked_output_is_one_line_naming_the_holder(
    init_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import signal
    import subprocess
    import sys

    out = tmp_path / "run"
    LOCK_FILE = ".lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_THE_LOCK, str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        for flags in ((), ("--resume",), ("--overwrite",)):
            assert main(_sst2_argv(init_dir, out, *flags)) == 1
            assert _err_lines(capsys) == [
                f"albert finetune: error: {out}: in use by another process (pid {holder.pid}, holding "
                f"{out / LOCK_FILE}); wait for it to end, or choose another output"
            ]
        pretrain = ["pretrain", "--recipe", "smoke", "--data-dir", str(tmp_path / "d"), "--run-dir", str(out)]
        assert main(pretrain) == 1  # pretraining's run directory: the same lock
        assert _err_lines(capsys) == [
            f"albert pretrain: error: {out}: in use by another process (pid {holder.pid}, holding "
            f"{out / LOCK_FILE}); wait for it to end, or choose another output"
        ]
        assert [p.name for p in out.iterdir()] == [LOCK_FILE]  # the other run's directory untouched
    finally:
        holder.send_signal(signal.SIGKILL)  # a crash: the kernel releases the flock
        holder.wait(timeout=30)
    from albert_lm._locks import lock_dir

    with lock_dir(out):  # free again, although the dead holder's file is still there
        assert (out / LOCK_FILE).read_text() == f"{os.getpid()}\n"
    assert list(out.iterdir()) == []  # the lock file goes with the lock (the directory is not ours)


# ------------------------------------------------------------- item 12: killed before the first checkpoint
def test_resume_of_a_run_killed_before_its_first_checkpoint_starts_it_over(
    init_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """What a fine-tune killed in its first minutes leaves (no step checkpoint yet, by default the first
    10 minutes): --resume used to refuse ("no complete checkpoint"), as did a plain rerun."""
    from albert_lm._locks import LOCK_FILE

    run = tmp_path / "run"
    (run / "checkpoints" / f".tmp-part-step-00000002.{2**22 + 7}").mkdir(parents=True)
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 0.7}\n')
    (run / LOCK_FILE).write_text("12345\n")  # the killed run's, no longer held
    assert main(_sst2_argv(init_dir, run)) == 1  # a plain rerun still refuses: it might be any earlier run
    assert "--resume continues it" in _err_lines(capsys)[0]
    assert main(_sst2_argv(init_dir, run, "--resume")) == 0, capsys.readouterr().err
    assert "holds no checkpoint yet" in caplog.text
    report = json.loads((run / REPORT_FILE).read_text())
    assert report["checkpoints"]["last"]["step"] == 2
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == sorted(r["step"] for r in records)
    assert not [r for r in records if r.get("loss") == 0.7]  # the killed run's log went with it
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best", "step-00000002"]
    assert [p.name for p in tmp_path.iterdir()] == ["run"] and not (run / LOCK_FILE).exists()


def test_resume_still_refuses_a_directory_that_is_not_an_early_run(
    init_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("mine")
    assert main(_sst2_argv(init_dir, run, "--resume")) == 1
    assert "no complete checkpoint" in capsys.readouterr().err
    assert [p.name for p in run.iterdir()] == ["notes.txt"]


# ------------------------------------------------------------------ items 10, 11 and the rest: one line
@pytest.mark.parametrize("content", [b"", b"garbage \x00\x01\x02", b"\x08\x07\x12\x04junk" * 3])
def test_a_broken_model_onnx_is_one_line_in_predict_and_serve(
    init_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
) -> None:
    pytest.importorskip("onnxruntime")
    model = _tuned(init_dir, tmp_path / "onnx")
    (model / "model.onnx").write_bytes(content)  # truncated to nothing, or garbage
    _stdin(monkeypatch, b"a sharp , smart film .\n")
    assert main(["predict", "--model", str(model), "--backend", "onnx"]) == 1
    (line,) = _err_lines(capsys)
    assert line.startswith(f"albert predict: error: {model / 'model.onnx'}: not a loadable ONNX model")
    assert main(["serve", str(model), "--backend", "onnx"]) == 1
    (line,) = _err_lines(capsys)
    assert line.startswith(f"albert serve: error: {model / 'model.onnx'}: not a loadable ONNX model")


@pytest.mark.parametrize(("flag", "value"), [("--port", "70000"), ("--port", "-1"), ("--max-batch", "0")])
def test_serve_flags_out_of_range_are_one_line(
    init_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    """Checked before the model loads; ``--port 70000`` used to be an OverflowError traceback from the
    socket, once the server started."""
    pytest.importorskip("uvicorn")
    assert main(["serve", str(_tuned(init_dir, tmp_path / "m")), flag, value]) == 1
    assert _err_lines(capsys) == [f"albert serve: error: {flag} {value}: must be " + (
        "between 0 and 65535" if flag == "--port" else "at least 1"
    )]  # fmt: skip


def test_a_crafted_pytorch_model_bin_is_refused_without_unsafe_advice(
    init_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    class Payload:
        def __reduce__(self):
            return (print, ("executed",))

    model = tmp_path / "m"
    model.mkdir()
    shutil.copy(init_dir / "config.json", model / "config.json")
    torch.save({"x": Payload()}, model / "pytorch_model.bin")
    from albert_lm.convert.hf import CheckpointError
    from albert_lm.model import AlbertModel

    with pytest.raises(CheckpointError) as info:
        AlbertModel.from_pretrained(model)
    message = str(info.value)
    assert "refused to unpickle" in message and "call or build print" in message
    assert "weights_only=False" not in message and "trust" not in message  # torch's advice, not passed on
    assert "executed" not in capsys.readouterr().out


def test_params_unknown_preset_is_one_line_listing_the_presets(capsys: pytest.CaptureFixture[str]) -> None:
    from albert_lm.config import PRESETS

    # --preset is a choice of the parser (issue 23's CLI work): a usage error that lists every preset
    with pytest.raises(SystemExit) as e:
        main(["params", "--preset", "no-such"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "invalid choice: 'no-such'" in err and "Traceback" not in err
    assert all(name in err for name in PRESETS)


def test_predict_max_seq_length_0_is_refused_not_ignored(
    init_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _tuned(init_dir, tmp_path / "m")
    _stdin(monkeypatch, b"a sharp , smart film .\n")
    assert main(["predict", "--model", str(model), "--max-seq-length", "0"]) == 1
    assert _err_lines(capsys) == [
        "albert predict: error: --max-seq-length 0: must be between 3 and 128, the model's "
        "max_position_embeddings"
    ]
