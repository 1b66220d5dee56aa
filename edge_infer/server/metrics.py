"""Prometheus metrics for /metrics.

Per-request figures (TTFT, time per output token, tokens) are recorded when a request
ends; engine state (queue, slots, KV cells, RSS, rates) is read from each loaded
engine's snapshot()
at scrape time, so it is never stale and costs nothing between scrapes. Each app has
its own registry: several servers (tests) can live in one process.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

from edge_infer.engine import RequestStats

disable_created_metrics()  # no `*_created` series: timestamps nobody graphs, doubling the output

_LATENCY = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_PER_TOKEN = (0.002, 0.005, 0.01, 0.02, 0.04, 0.08, 0.15, 0.3, 0.6, 1.2)


class EngineCollector:
    """Engine gauges and counters, one series per loaded model."""

    def __init__(self, host):
        self.host = host

    def collect(self):
        snaps = [m.engine.snapshot() for m in self.host.loaded()]
        families = {}
        for s in snaps:
            for family in self._families(s):
                if family.name in families:
                    families[family.name].samples.extend(family.samples)
                else:
                    families[family.name] = family
        yield from families.values()

    def _families(self, s):
        labels = {"model": s.model}
        gauges = [
            ("queue_depth", "Requests waiting for a slot", s.queued),
            ("requests_running", "Requests holding a slot", s.running),
            ("slots_busy", "Slots (sequences) in use", s.slots_busy),
            ("slots_total", "Slots (sequences) configured", s.n_slots),
            ("kv_cells_used", "KV cache cells holding tokens", s.kv_cells_used),
            ("kv_cells_total", "KV cache cells allocated", s.kv_cells_total),
            ("rss_bytes", "Resident memory of the server process", s.rss_bytes),
            ("prompt_cache_bytes", "KV state bytes held by the RAM prompt cache", s.prompt_cache_bytes),
            ("prompt_cache_cap_bytes", "Cap of the RAM prompt cache (--prompt-cache-mib)",
             s.prompt_cache_cap_bytes),
            ("prompt_cache_entries", "Saved conversations in the RAM prompt cache", s.prompt_cache_entries),
            ("disk_cache_bytes", "Bytes of saved KV states in the disk cache folder (every model's)",
             s.disk_cache_bytes),
            ("disk_cache_cap_bytes", "Cap of the disk prompt cache (--disk-cache; 0 = off)", s.disk_cache_cap_bytes),
            ("disk_cache_entries", "Saved conversations of this model in the disk prompt cache",
             s.disk_cache_entries),
            ("cpu_poll", "How long CPU workers spin before sleeping, 0-100 (0 while other programs are busy)",
             s.poll),
            ("other_load_cores", "CPU other programs use, in cores (what the poll follows)", s.other_load_cores),
            ("decode_tokens_per_second", "Aggregate decode rate over the last seconds", s.decode_tok_s),
            ("prefill_tokens_per_second", "Aggregate prefill rate over the last seconds", s.prefill_tok_s),
            ("draft_acceptance_ratio", "n-gram speculation: drafted tokens the model confirmed, since start",
             s.draft_acceptance),
        ]
        for name, doc, value in gauges:
            g = GaugeMetricFamily(f"edge_infer_{name}", doc, labels=list(labels))
            g.add_metric(list(labels.values()), value)
            yield g
        counters = [
            ("engine_requests", "Requests the engine accepted", s.requests_total),
            ("engine_prompt_eval_tokens", "Prompt tokens evaluated (not reused from cache)",
             s.prompt_eval_tokens_total),
            ("kv_preemptions", "Running requests preempted because the KV pool was full",
             s.kv_preemptions_total),
            ("kv_evictions", "Idle slots' KV leftovers evicted for room", s.kv_evictions_total),
            ("prompt_cache_hits", "Admissions that restored a saved prefix", s.prompt_cache_hits_total),
            ("prompt_cache_misses", "Prompt cache lookups that found nothing", s.prompt_cache_misses_total),
            ("prompt_cache_evictions", "Saved states dropped to stay under the cap",
             s.prompt_cache_evictions_total),
            ("prompt_cache_restored_tokens", "Tokens restored from the prompt cache instead of evaluated",
             s.prompt_cache_restored_tokens_total),
            ("disk_cache_hits", "Admissions that restored a saved prefix from disk", s.disk_cache_hits_total),
            ("disk_cache_writes", "KV states written to the disk prompt cache", s.disk_cache_writes_total),
            ("disk_cache_evictions", "Saved states deleted from disk to stay under the cap",
             s.disk_cache_evictions_total),
            ("disk_cache_rejected", "Saved state files found corrupt, truncated or stale and deleted",
             s.disk_cache_rejected_total),
            ("disk_cache_restored_tokens", "Tokens restored from the disk prompt cache instead of evaluated",
             s.disk_cache_restored_tokens_total),
            ("draft_tokens", "n-gram speculation: tokens drafted and verified", s.draft_tokens_total),
            ("draft_accepted_tokens", "n-gram speculation: drafted tokens the model confirmed",
             s.draft_accepted_total),
        ]
        for name, doc, value in counters:
            c = CounterMetricFamily(f"edge_infer_{name}", doc, labels=list(labels))
            c.add_metric(list(labels.values()), value)
            yield c
        yield from self._device_families(s)

    def _device_families(self, s):
        """Per device: what llama.cpp allocated for this model there (by buffer kind), and
        the device's free and total memory."""
        used = GaugeMetricFamily("edge_infer_device_memory_bytes",
                                 "Memory llama.cpp allocated for the model on each device, by buffer",
                                 labels=["model", "device", "buffer"])
        free = GaugeMetricFamily("edge_infer_device_free_bytes", "Free memory of each device",
                                 labels=["model", "device"])
        total = GaugeMetricFamily("edge_infer_device_total_bytes", "Total memory of each device",
                                  labels=["model", "device"])
        layers = GaugeMetricFamily("edge_infer_device_layers", "Layers of the model placed on each device",
                                   labels=["model", "device"])
        for d in s.devices:
            for buffer, value in (("model", d.model_bytes), ("kv", d.kv_bytes), ("compute", d.compute_bytes)):
                used.add_metric([s.model, d.device, buffer], value)
            layers.add_metric([s.model, d.device], d.layers)
            if d.total_bytes:
                free.add_metric([s.model, d.device], d.free_bytes)
                total.add_metric([s.model, d.device], d.total_bytes)
        yield from (used, free, total, layers)


class RemoteCollector:
    """Per remote model and upstream URL: whether it answers, requests in flight, requests,
    errors and latency (request to last byte), read from edge_infer.remote at scrape time."""

    def __init__(self, remotes):
        self.remotes = remotes

    def collect(self):
        labels = ["model", "url"]
        up = GaugeMetricFamily("edge_infer_remote_up", "1 while the upstream answers (requests, health checks)",
                               labels=labels)
        flight = GaugeMetricFamily("edge_infer_remote_in_flight", "Requests forwarded and not yet answered",
                                   labels=labels)
        requests = CounterMetricFamily("edge_infer_remote_requests", "Requests forwarded that ended",
                                       labels=labels)
        errors = CounterMetricFamily("edge_infer_remote_errors",
                                     "Forwarded requests that failed (unreachable, dropped, timed out, 5xx)",
                                     labels=labels)
        latency = SummaryMetricFamily("edge_infer_remote_latency_seconds",
                                      "Forwarded requests answered: seconds until their last byte", labels=labels)
        for m in self.remotes.models.values():
            for u in m.upstreams:
                key = [m.name, u.url]
                up.add_metric(key, 1 if u.up else 0)
                flight.add_metric(key, u.in_flight)
                requests.add_metric(key, u.requests)
                errors.add_metric(key, u.errors)
                latency.add_metric(key, count_value=u.latency_count, sum_value=u.latency_sum)
        yield from (up, flight, requests, errors, latency)


class StoreCollector:
    """The Responses API's store: how many responses, how many bytes, how many evicted."""

    def __init__(self, store):
        self.store = store

    def collect(self):
        s = self.store
        yield GaugeMetricFamily("edge_infer_responses_stored", "Responses kept for previous_response_id", len(s))
        yield GaugeMetricFamily("edge_infer_responses_stored_bytes", "Bytes of the stored responses", s.bytes)
        yield CounterMetricFamily("edge_infer_responses_evicted", "Stored responses evicted for room", s.evictions)


class Metrics:
    def __init__(self, host, response_store=None):
        self.registry = r = CollectorRegistry()
        self.requests = Counter("edge_infer_http_requests", "HTTP requests by endpoint and status",
                                ["endpoint", "status"], registry=r)
        self.by_key = Counter("edge_infer_http_requests_by_key", "HTTP requests by API key name (never the key), "
                              "endpoint and status", ["key", "endpoint", "status"], registry=r)
        self.prompt_tokens = Counter("edge_infer_prompt_tokens", "Prompt tokens of finished requests", registry=r)
        self.completion_tokens = Counter("edge_infer_completion_tokens", "Generated tokens", registry=r)
        self.cancelled = Counter("edge_infer_cancelled_requests", "Generations cancelled (client left)",
                                 registry=r)
        self.ttft = Histogram("edge_infer_time_to_first_token_seconds", "Queue + prefill until the first token",
                              buckets=_LATENCY, registry=r)
        self.per_token = Histogram("edge_infer_time_per_output_token_seconds",
                                   "Mean time between generated tokens, per request", buckets=_PER_TOKEN,
                                   registry=r)
        self.duration = Histogram("edge_infer_request_duration_seconds", "Submit until the last token",
                                  buckets=_LATENCY, registry=r)
        r.register(EngineCollector(host))
        if getattr(host, "remotes", None):
            r.register(RemoteCollector(host.remotes))
        if response_store is not None:
            r.register(StoreCollector(response_store))

    def request(self, endpoint: str, status: int, key: str | None = None) -> None:
        """key: the name of the request's API key ('-': none or unknown), when the server has keys."""
        self.requests.labels(endpoint, str(status)).inc()
        if key is not None:
            self.by_key.labels(key, endpoint, str(status)).inc()

    def generation(self, stats: RequestStats, reason: str) -> None:
        self.prompt_tokens.inc(stats.prompt_tokens)
        self.completion_tokens.inc(stats.generated_tokens)
        if reason == "cancelled":
            self.cancelled.inc()
        if stats.first_token_at:
            self.ttft.observe(stats.ttft_s)
            if stats.finished_at and stats.generated_tokens > 1:
                self.per_token.observe((stats.finished_at - stats.first_token_at) / (stats.generated_tokens - 1))
        if stats.finished_at:
            self.duration.observe(stats.finished_at - stats.queued_at)

    def render(self) -> bytes:
        return generate_latest(self.registry)
