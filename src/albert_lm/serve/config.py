"""`ServeConfig`: how `albert serve` listens, batches and limits requests (its fields are the command's
flags; this module imports nothing heavy, so that ``albert serve --help`` starts fast)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServeConfig:
    """How `albert serve` listens, batches and limits requests."""

    host: str = "127.0.0.1"
    """Address to listen on (127.0.0.1: this machine only)."""
    port: int = 8000
    """TCP port."""
    max_batch: int = 32
    """Most inputs per model call; concurrent requests share a call."""
    max_wait_ms: float = 5.0
    """How long the first input of a batch waits for more inputs to join it."""
    max_body_bytes: int = 1_000_000
    """Largest request body (413 above)."""
    max_inputs: int = 256
    """Most inputs (texts, pairs or items) in one request (413 above)."""
    max_text_chars: int = 20_000
    """Longest text, in characters (413 above); texts are cut to the model's sequence length anyway."""
    max_pending: int = 4096
    """Most inputs waiting for the model; a request that would exceed it gets 503."""
    shutdown_timeout_s: float = 30.0
    """On SIGTERM, how long requests in flight may take to finish; inputs not computed by then are answered
    503 (shutting down) and the process exits."""
    body_timeout_s: float = 30.0
    """How long a request body may take to arrive (408 after it): a client that trickles its upload would
    otherwise hold a connection forever."""

    def __post_init__(self) -> None:
        """Checked here, once, so that a bad value is one line before the model loads (a port out of
        range used to be an OverflowError traceback from the socket once the server started)."""
        if not 0 <= self.port <= 65535:
            raise ValueError(f"--port {self.port}: must be between 0 and 65535")
        for name in ("max_batch", "max_inputs", "max_text_chars", "max_pending"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} {getattr(self, name)}: must be at least 1")
        if self.max_body_bytes < 0:  # 0: no limit
            raise ValueError(f"--max-body-bytes {self.max_body_bytes}: must be >= 0 (0: no limit)")
        for name in ("max_wait_ms", "shutdown_timeout_s", "body_timeout_s"):
            value = getattr(self, name)
            if not 0 <= value < float("inf"):  # NaN fails too
                raise ValueError(f"--{name.replace('_', '-')} {value}: must be a finite number >= 0")
