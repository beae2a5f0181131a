"""The service's settings: its limits and switches (`ServerSettings`), and what it does with token ids."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..errors import InvalidSpec

__all__ = ["TokenIds", "ServerSettings"]


class TokenIds(str, Enum):
    """What the service does with inputs given as lists of token ids."""

    REFUSE = "refuse"  # a client-side tokenizer's ids (tiktoken's) would be embedded as BERT pieces
    MODEL = "model"  # the ids are this model's own vocabulary


@dataclass(frozen=True)
class ServerSettings:
    """Limits and switches of one service; `None` max_batch_tokens means the engine's own token budget."""

    api_key: str | None = None
    cors_origins: tuple[str, ...] = ()
    max_batch_tokens: int | None = None
    max_wait_ms: float = 2.0
    max_queue: int = 256
    # The share of the queue (--max-queue jobs, 32 batches of tokens) one client address may have waiting
    # (`batching.Batcher`); 1.0 where every client comes through one proxy's address.
    queue_share: float = 0.5
    max_inputs: int = 256
    max_body_bytes: int = 4 * 1024 * 1024
    # Seconds a request body may take to arrive in full (408, and the connection is closed).
    body_timeout_s: float = 30.0
    # Tokens one request may run, x the layers kept of each where a route keeps several (413 above);
    # None: what an eighth of the machine's memory holds (`service.request_token_budget`).
    max_request_tokens: int | None = None
    # Bytes of request bodies held at once across every connection (503 with Retry-After above); the
    # same again for answers waiting for their clients.
    max_buffered_bytes: int = 64 * 1024 * 1024
    # The share of max_buffered_bytes one client address may hold (bodies and answers alike), so one
    # client cannot take all of it; 1.0 where every client comes through one proxy's address.
    max_buffered_share: float = 0.5
    # Seconds a request's head (request line and headers) may take, from the connection opening or the
    # last answer; the connection is closed after (`connection.HeadTimedH11Protocol`).
    header_timeout_s: float = 10.0
    # Seconds a client may take none of an answer being written before its connection is closed (nginx's
    # send_timeout): a client that never reads cannot hold the answer's bytes (`connection`).
    send_timeout_s: float = 30.0
    # Connections open at once; one more is answered 503 and closed as it opens (`connection`). None: half
    # the open-file limit, at most 4,096 (`capacity.default_max_connections`).
    max_connections: int | None = None
    # The share of max_connections one client address may hold open (`connection`), so one client's idle
    # connections cannot lock the others out; 1.0 where every client comes through one proxy's address.
    connection_share: float = 0.5
    # Seconds an idle connection stays open after an answer (uvicorn's timeout_keep_alive).
    keep_alive_s: float = 5.0
    # Numbers one answer may hold (token vectors of every layer for many texts grow past any memory).
    max_answer_floats: int = 8 * 1024 * 1024
    auto_split: bool = False
    batching: bool = True
    posts: tuple[tuple[str, str], ...] = ()
    stores: tuple[tuple[str, str], ...] = ()
    # Lists of ints on /v1/embeddings and TEI's /embed: refused unless they are this model's own ids.
    token_ids: TokenIds = TokenIds.REFUSE

    def __post_init__(self) -> None:
        if self.api_key is not None and not self.api_key.strip():
            raise InvalidSpec("api_key is empty: give a key, or None to serve without one")
        if not 0 < self.max_buffered_share <= 1:
            raise InvalidSpec(
                f"max_buffered_share is {self.max_buffered_share}: give a share of --max-buffered-bytes "
                "above 0 and at most 1 (1: no share per client address)"
            )
        if self.max_connections is not None and self.max_connections < 1:
            raise InvalidSpec(
                f"max_connections is {self.max_connections}: give 1 or more, or None for half the "
                "open-file limit"
            )
        if not 0 < self.connection_share <= 1:
            raise InvalidSpec(
                f"connection_share is {self.connection_share}: give a share of --max-connections above 0 "
                "and at most 1 (1: no share per client address)"
            )
        if not 0 < self.queue_share <= 1:
            raise InvalidSpec(
                f"queue_share is {self.queue_share}: give a share of the queue above 0 and at most 1 "
                "(1: no share per client address)"
            )
