"""``GET /metrics``: what operators scrape from ``specvideo serve``, in Prometheus' text format,
through the ``prometheus_client`` library (each engine has a registry of its own, so two servers in
one process, or tests, never share a series).

Series (names follow Prometheus' conventions: a ``specvideo_`` prefix, base units, ``_total`` on
counters):

- ``specvideo_requests_total{route,status}``: every answered HTTP request, by its route's template
  (unmatched paths as "unmatched", so a scan cannot grow the series) and status code;
- ``specvideo_queue_depth`` / ``specvideo_batch_rows``: requests waiting, rows decoding now;
- ``specvideo_batch_width`` (histogram): the rows of each continuous-batch round;
- ``specvideo_prompt_tokens_total`` / ``specvideo_generation_tokens_total``;
- ``specvideo_time_to_first_token_seconds`` / ``specvideo_time_per_output_token_seconds``
  (histograms, per finished request; the second over the tokens after the first);
- ``specvideo_speculative_acceptance_ratio`` / ``specvideo_tokens_per_target_call`` (histograms:
  the run a request finished in, as its answer's ``speculative`` field reports them);
- ``specvideo_prompt_cache_hits_total`` / ``specvideo_prompt_cache_saved_tokens_total``: requests
  whose prompt started from cached keys and values, and the prompt tokens that saved.
"""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

TTFT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
TPOT_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
WIDTH_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 32)
RATIO_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
CALL_BUCKETS = (1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 6.0)


class ServeMetrics:
    """The server's series in a registry of their own; ``render`` is the /metrics body."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, queue_depth=lambda: 0, batch_rows=lambda: 0):
        """queue_depth, batch_rows: read at every scrape (the engine's queue and running rows)."""
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.requests = Counter("specvideo_requests", "HTTP requests answered", ("route", "status"), registry=r)
        Gauge("specvideo_queue_depth", "requests waiting in the queue", registry=r).set_function(queue_depth)
        Gauge("specvideo_batch_rows", "rows decoding in the running batch", registry=r).set_function(batch_rows)
        self.batch_width = Histogram(
            "specvideo_batch_width", "rows of each continuous-batch round", buckets=WIDTH_BUCKETS, registry=r
        )
        self.target_forwards = Counter(
            "specvideo_target_forwards", "target forwards of rounds: the running batch's and /v1/verify rounds run alone", registry=r
        )
        self.prompt_tokens = Counter("specvideo_prompt_tokens", "prompt tokens of finished requests", registry=r)
        self.generation_tokens = Counter("specvideo_generation_tokens", "tokens generated", registry=r)
        self.ttft = Histogram(
            "specvideo_time_to_first_token_seconds", "request start to its first text", buckets=TTFT_BUCKETS, registry=r
        )
        self.tpot = Histogram(
            "specvideo_time_per_output_token_seconds", "seconds per token after the first", buckets=TPOT_BUCKETS, registry=r
        )
        self.acceptance = Histogram(
            "specvideo_speculative_acceptance_ratio", "drafted tokens the target accepted", buckets=RATIO_BUCKETS, registry=r
        )
        self.per_call = Histogram(
            "specvideo_tokens_per_target_call", "tokens each target forward yielded", buckets=CALL_BUCKETS, registry=r
        )
        self.cache_hits = Counter("specvideo_prompt_cache_hits", "prompts that started from cached keys and values", registry=r)
        self.cache_saved = Counter("specvideo_prompt_cache_saved_tokens", "prompt tokens the prompt cache saved", registry=r)

    def answered(self, route: str, status: int) -> None:
        self.requests.labels(route, str(status)).inc()

    def finished(self, prompt_tokens: int, tokens: int, ttft_s: float | None, total_s: float, event) -> None:
        """One request's Done: its tokens, latencies, speculation and prompt-cache savings."""
        self.prompt_tokens.inc(prompt_tokens)
        self.generation_tokens.inc(tokens)
        if ttft_s is not None and tokens:
            self.ttft.observe(ttft_s)
            if tokens > 1:
                self.tpot.observe(max(0.0, total_s - ttft_s) / (tokens - 1))
        speculative = getattr(event, "speculative", None) or {}
        if speculative.get("acceptance_rate") is not None:
            self.acceptance.observe(speculative["acceptance_rate"])
        if speculative.get("tokens_per_target_call") is not None:
            self.per_call.observe(speculative["tokens_per_target_call"])
        cached = (getattr(event, "timings", None) or {}).get("cached_tokens", 0)
        if cached:
            self.cache_hits.inc()
            self.cache_saved.inc(cached)

    def render(self) -> bytes:
        return generate_latest(self.registry)
