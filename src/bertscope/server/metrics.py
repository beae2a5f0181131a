"""The service's Prometheus metrics: requests, latency, the queue, batches and forwards, abandoned work."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["Metrics"]

_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
_TOKENS = (16, 64, 256, 1024, 4096, 16384, 65536)


class Metrics:
    """The service's Prometheus metrics, in a registry of their own (one per app)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "bertscope_requests", "HTTP requests by endpoint and status", ["endpoint", "status"], registry=r
        )
        self.latency = Histogram(
            "bertscope_request_seconds", "HTTP request latency by endpoint", ["endpoint"], registry=r
        )
        self.queue_size = Gauge("bertscope_queue_size", "Jobs waiting for the inference worker", registry=r)
        self.buffered_bytes = Gauge(
            "bertscope_request_body_bytes_held", "Bytes of request bodies held across connections", registry=r
        )
        self.answer_bytes = Gauge(
            "bertscope_answer_bytes_held",
            "Bytes of large answers made and not yet taken by their clients, across connections",
            registry=r,
        )
        self.batch_requests = Histogram(
            "bertscope_batch_requests", "Jobs taken by the worker in one batch", buckets=_SIZES, registry=r
        )
        self.batch_texts = Histogram(
            "bertscope_forward_texts", "Texts in one forward", buckets=_SIZES, registry=r
        )
        self.batch_tokens = Histogram(
            "bertscope_forward_tokens", "Real (unpadded) tokens in one forward", buckets=_TOKENS, registry=r
        )
        self.connections_open = Gauge("bertscope_connections_open", "HTTP connections open", registry=r)
        self.connections_refused = Counter(
            "bertscope_connections_refused",
            "Connections answered 503 and closed on arrival: --max-connections were open",
            registry=r,
        )
        self.accept_errors = Counter(
            "bertscope_accept_errors",
            "Connections the process could not accept: no file descriptor free (asyncio retries each second)",
            registry=r,
        )
        self.busy = Counter("bertscope_worker_busy_seconds", "Time the worker spent running jobs", registry=r)
        self.abandoned = Counter(
            "bertscope_requests_abandoned", "Requests whose client left before the answer", registry=r
        )
        self.stopped = Counter(
            "bertscope_abandoned_work_stopped",
            "Running jobs stopped at a batch boundary because every client waiting on them left",
            registry=r,
        )
        self.skipped_texts = Counter(
            "bertscope_abandoned_texts_skipped",
            "Texts of abandoned requests taken out of the queue or stopped before their forward",
            registry=r,
        )

    def count_connections(self, open_now: int, *, refused: bool = False) -> None:
        """Connection callback: the connections open now, and one refused on arrival."""
        self.connections_open.set(open_now)
        if refused:
            self.connections_refused.inc()

    def on_forward(self, n_texts: int, n_tokens: int) -> None:
        """Engine callback: record one forward's size."""
        self.batch_texts.observe(n_texts)
        self.batch_tokens.observe(n_tokens)
