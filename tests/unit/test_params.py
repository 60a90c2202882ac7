from __future__ import annotations

import pytest

from albert.params import PAPER_ROWS, agrees, count_parameters

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
    from albert.config import AlbertConfig

    ratio = count_parameters(AlbertConfig.from_preset("bert-large")) / count_parameters(
        AlbertConfig.from_preset("albert-large-v2")
    )
    assert 18.0 <= ratio < 19.5


def test_params_cli_json(capsys):
    import json

    from albert.cli.main import main

    assert main(["params", "--table", "4", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 8 and all(r["agrees"] for r in rows)
