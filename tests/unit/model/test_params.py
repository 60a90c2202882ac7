from __future__ import annotations

import pytest

from albert_lm.params import PAPER_ROWS, agrees, count_parameters

KNOWN_DISAGREEMENTS = {"ALBERT xlarge": 58.7, "ALBERT xxlarge": 222.6}  # released configs vs paper Table 1


@pytest.mark.parametrize("row", PAPER_ROWS, ids=lambda r: f"T{r.table}-{r.label}")
def test_paper_tables(row):
    n = count_parameters(row.config())
    if row.label in KNOWN_DISAGREEMENTS:
        assert round(n / 1e6, 1) == KNOWN_DISAGREEMENTS[row.label]
        assert not agrees(n, row.paper_m)
    else:
        assert agrees(n, row.paper_m), f"{row.label}: ours {n / 1e6:.2f}M vs paper {row.paper_m}M"


def test_albert_large_is_18x_smaller_than_bert_large():
    from albert_lm.config import AlbertConfig

    ratio = count_parameters(AlbertConfig.from_preset("bert-large")) / count_parameters(
        AlbertConfig.from_preset("albert-large-v2")
    )
    assert 18.0 <= ratio < 19.5


def test_params_cli_json(capsys):
    import json

    from albert_lm.cli.main import main

    assert main(["params", "--table", "4", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 8 and all(r["agrees"] for r in rows)


def test_params_cli_applies_every_set(capsys):
    """Each --set is applied: a second --set used to replace the first (argparse nargs without extend)."""
    import json

    from albert_lm.cli.main import main
    from albert_lm.config import AlbertConfig

    def counted(*sets: str) -> int:
        argv = ["params", "--preset", "albert-base-v2", "--json"]
        for s in sets:
            argv += ["--set", s]
        assert main(argv) == 0
        return int(json.loads(capsys.readouterr().out)["parameters"])

    both = count_parameters(AlbertConfig.from_preset("albert-base-v2", embedding_size=256, sharing="ffn"))
    assert counted("embedding_size=256", "sharing=ffn") == both
    assert counted("sharing=ffn", "embedding_size=256") == both
    assert counted("sharing=ffn") != both and counted("embedding_size=256") != both


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--preset", "albert-base-v2", "--set", "embedding_size"], "--set: expected FIELD=VALUE"),
        (["--set", "embedding_size=256"], "--set: needs --preset"),
        (["--preset", "albert-base-v2", "--set", "nope=1"], "unknown AlbertConfig field(s) ['nope']"),
    ],
)
def test_params_cli_bad_set_is_one_line(capsys, argv, message):
    from albert_lm.cli.main import main

    assert main(["params", *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_params_cli_unknown_preset_is_a_usage_error(capsys):
    from albert_lm.cli.main import main

    with pytest.raises(SystemExit) as e:
        main(["params", "--preset", "albert-nope"])
    assert e.value.code == 2 and "invalid choice: 'albert-nope'" in capsys.readouterr().err
