"""Hugging Face Hub ids where a model directory is expected: ``albert/albert-base-v2`` -> a local snapshot.

The one place that turns an id into a directory, the way transformers does: through ``huggingface_hub`` and
its cache (``HF_HOME``, ``HF_HUB_CACHE``, ``HF_HUB_OFFLINE``, ``HF_TOKEN``). A local path that exists is
returned as it is; anything else of the form ``owner/name`` is an id. Online, the files a model directory
needs are fetched (``model.safetensors`` when the repository has one, else ``pytorch_model.bin``, which
`albert_lm.convert.hf.read_state_dict` reads only with ``torch.load(weights_only=True)``); offline
(``HF_HUB_OFFLINE=1``) only the cache is read, and an id that is not there is one error saying what to run.

The bottom of the import order, beside `albert_lm._io`: the tokenizer, config and model loaders all call it.
``huggingface_hub`` is imported only when an id is resolved.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

__all__ = ["HubModelNotFound", "hub_id_of", "is_hub_id", "resolve_model_dir"]

logger = logging.getLogger(__name__)

# owner/name as the Hub spells repository ids (letters, digits, "-", "_", "."; no "--" or ".." runs)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")

# what a model directory is made of (weights are chosen apart: safetensors first)
MODEL_FILES = (
    "config.json",
    "README.md",
    "spiece.model",
    "*.model",
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
SAFETENSORS_FILES = ("model.safetensors", "model.safetensors.index.json", "model-*.safetensors")
PICKLE_FILES = ("pytorch_model.bin",)


class HubModelNotFound(FileNotFoundError):
    """Neither a local directory nor a Hub id that could be resolved; the message says what to do."""


def is_hub_id(name: str | Path) -> bool:
    """Whether ``name`` reads as a Hub repository id (``owner/name``) rather than a path."""
    text = str(name)
    return bool(_HUB_ID.match(text)) and ".." not in text and "--" not in text


def hub_id_of(name: str | Path) -> str | None:
    """The Hub id that ``name`` is, or whose cached snapshot it is
    (``.../models--albert--albert-base-v2/snapshots/<commit>`` -> ``albert/albert-base-v2``); else None."""
    text = str(name)
    if is_hub_id(text) and not Path(text).exists():
        return text
    parts = Path(text).parts
    for folder, below in zip(parts, parts[1:]):
        if folder.startswith("models--") and below == "snapshots":
            repo_id = folder.removeprefix("models--").replace("--", "/", 1)
            return repo_id if is_hub_id(repo_id) else None
    return None


def resolve_model_dir(name: str | Path, revision: str | None = None, *, everything: bool = False) -> Path:
    """The local directory of ``name``: ``name`` itself when it exists (or is not a Hub id), else the
    snapshot of the Hub repository ``name`` at ``revision`` (a branch, tag or commit; default ``main``).

    Args:
        name: a path, or a Hub id such as ``albert/albert-base-v2``.
        revision: the Hub revision; an error with a local path (a directory has no revisions).
        everything: fetch every file of the repository (a TF checkpoint for `albert convert`), not only
            those of a model directory.

    Raises:
        HubModelNotFound: an id that is not in the cache while offline, not on the Hub, or a revision
            the repository does not have (one line each, saying what to run).
        ValueError: ``revision`` given with a local path.
    """
    path = Path(name)
    if path.exists() or not is_hub_id(name):
        if revision is not None:
            raise ValueError(f"{name}: a local path has no revision (revision={revision!r} is for Hub ids)")
        return path
    return _snapshot(str(name), revision, everything)


def _snapshot(repo_id: str, revision: str | None, everything: bool) -> Path:
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    at = f"{repo_id}@{revision}" if revision else repo_id
    offline = bool(constants.HF_HUB_OFFLINE)
    try:
        patterns = None if everything or offline else _patterns(repo_id, revision)
        folder = snapshot_download(
            repo_id, revision=revision, allow_patterns=patterns, local_files_only=offline
        )
    except GatedRepoError:
        raise HubModelNotFound(
            f"{at}: a gated Hub repository; accept its terms on huggingface.co and log in "
            "(`huggingface-cli login` or HF_TOKEN)"
        ) from None
    except RepositoryNotFoundError:
        raise HubModelNotFound(
            f"{at}: no such local directory, and no such model on the Hugging Face Hub (private? "
            "log in with `huggingface-cli login` or set HF_TOKEN)"
        ) from None
    except RevisionNotFoundError:
        raise HubModelNotFound(f"{at}: the Hub repository {repo_id} has no revision {revision!r}") from None
    except LocalEntryNotFoundError:
        cache = constants.HF_HUB_CACHE
        if offline:
            raise HubModelNotFound(
                f"{at}: no such local directory, and not in the Hugging Face cache {cache} while "
                f"HF_HUB_OFFLINE=1: run `huggingface-cli download {repo_id}"
                f"{f' --revision {revision}' if revision else ''}` (or unset HF_HUB_OFFLINE to fetch it)"
            ) from None
        raise HubModelNotFound(
            f"{at}: no such local directory, the Hugging Face Hub cannot be reached and it is not in the "
            f"cache {cache}: connect, or run `huggingface-cli download {repo_id}` where you can"
        ) from None
    logger.info("%s: the Hub snapshot %s", at, folder)
    return Path(folder)


def _patterns(repo_id: str, revision: str | None) -> list[str] | None:
    """The files of a model directory that ``repo_id`` has, safetensors preferred over the pickle (None:
    the file list could not be read; `snapshot_download` then says why, or serves the cache)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        files = HfApi().list_repo_files(repo_id, revision=revision)
    except (RepositoryNotFoundError, RevisionNotFoundError):
        raise
    except (HfHubHTTPError, OSError):  # no connection: the cache decides
        return None
    has_safetensors = any(f.endswith(".safetensors") for f in files)
    weights = SAFETENSORS_FILES if has_safetensors else PICKLE_FILES
    return [*MODEL_FILES, *weights]
