"""`albert plot` where matplotlib is not installed: one line naming the extra to install, exit 1."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from albert_lm.cli.main import main


def test_plot_without_matplotlib_names_the_extra(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    run = tmp_path / "run"
    run.mkdir()
    records = [{"step": s, "loss": 5.0 - s, "lr": 1e-3} for s in (1, 2, 3)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an environment without it gives: ImportError
    assert main(["plot", str(run)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("albert plot: error: ") and "pip install 'albert-lm[plot]'" in err
    assert not (run / "curves.png").exists()


def test_plot_with_matplotlib_still_draws(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    run = tmp_path / "run"
    run.mkdir()
    records = [{"step": s, "loss": 5.0 - s, "lr": 1e-3} for s in (1, 2, 3)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["plot", str(run)]) == 0
    assert (run / "curves.png").stat().st_size > 0
