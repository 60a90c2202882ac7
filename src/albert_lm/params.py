"""Parameter counts next to the paper's Tables 1, 3 and 4.

Counts are of the encoder as the paper and Hugging Face count it: embeddings (incl. the E->H projection),
the transformer layers and the pooler, without the pretraining heads (`AlbertModel`). Models are built on
the ``meta`` device, so even BERT-xlarge costs no memory.

The paper prints millions as integers and does not round them consistently (Table 3: 9.7M printed as 10M,
87.6M as 87M), so a count agrees with the paper when it is within 1.1M (or 0.5% above 200M) of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from albert_lm.config import AlbertConfig


@dataclass(frozen=True)
class PaperRow:
    table: str
    label: str
    preset: str
    overrides: tuple[tuple[str, object], ...]
    paper_m: float
    note: str = ""

    def config(self) -> AlbertConfig:
        return AlbertConfig.from_preset(self.preset, **dict(self.overrides))


_XL_NOTE = "released albert_config.json gives {ours}; the paper's Table 1 says {paper}M"

PAPER_ROWS: list[PaperRow] = [
    # paper Table 1 (configurations of the main BERT and ALBERT models)
    PaperRow("1", "BERT base", "bert-base", (), 108),
    PaperRow("1", "BERT large", "bert-large", (), 334),
    PaperRow("1", "BERT xlarge", "bert-xlarge", (), 1270),
    PaperRow("1", "ALBERT base", "albert-base-v2", (), 12),
    PaperRow("1", "ALBERT large", "albert-large-v2", (), 18),
    PaperRow("1", "ALBERT xlarge", "albert-xlarge-v2", (), 60, _XL_NOTE),
    PaperRow("1", "ALBERT xxlarge", "albert-xxlarge-v2", (), 235, _XL_NOTE),
]
# paper Table 3 (embedding size E, ALBERT-base, not-shared and all-shared)
for _sh, _values in (("none", (87, 89, 93, 108)), ("all", (10, 12, 16, 31))):
    for _e, _m in zip((64, 128, 256, 768), _values):
        _label = f"ALBERT base {'not-shared' if _sh == 'none' else 'all-shared'} E={_e}"
        PAPER_ROWS.append(
            PaperRow("3", _label, "albert-base-v2", (("embedding_size", _e), ("sharing", _sh)), _m)
        )
# paper Table 4 (cross-layer sharing, ALBERT-base, E = 768 and 128)
for _e, _values in ((768, (31, 83, 57, 108)), (128, (12, 64, 38, 89))):
    for _sh, _m in zip(("all", "attention", "ffn", "none"), _values):
        _name = {
            "all": "all-shared",
            "attention": "shared-attention",
            "ffn": "shared-FFN",
            "none": "not-shared",
        }[_sh]
        PAPER_ROWS.append(
            PaperRow(
                "4",
                f"ALBERT base E={_e} {_name}",
                "albert-base-v2",
                (("embedding_size", _e), ("sharing", _sh)),
                _m,
            )
        )


def count_parameters(config: AlbertConfig) -> int:
    """Parameters of `AlbertModel(config)` (embeddings + encoder + pooler), built on the meta device."""
    from albert_lm.model import AlbertModel

    with torch.device("meta"):
        return AlbertModel(config).num_parameters()


def tolerance_m(paper_m: float) -> float:
    return max(1.1, 0.005 * paper_m)


def agrees(ours: int, paper_m: float) -> bool:
    return abs(ours / 1e6 - paper_m) <= tolerance_m(paper_m)
