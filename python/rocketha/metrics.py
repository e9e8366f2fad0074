"""Prometheus metrics of a broker (``metricsPort``), read from live state at scrape time, and
the same state as JSON at ``/status`` for ``rocketha status``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, Histogram, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector

from rocketha._service import ServiceThread

if TYPE_CHECKING:
    from rocketha.roles import PutStatus


class _QuietHandler(WSGIRequestHandler):
    """Scrapes are not worth a log line each."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class BrokerMetrics(Collector):
    """Serves what ``status`` returns (a broker's :meth:`~rocketha.Broker.ha_status`) at
    ``/status`` and as Prometheus gauges at ``/metrics``, read at each request."""

    def __init__(self, status: Callable[[], dict[str, Any]]) -> None:
        self.status = status
        self.registry = CollectorRegistry()
        self.put_latency = Histogram(
            "rocketha_put_latency_seconds",
            "Broker put latency by status",
            ["status"],
            registry=self.registry,
            buckets=(5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 5e-2, 0.1, 1, 5),
        )
        self.registry.register(self)
        self._server: Any = None
        self.port: int | None = None

    def observe_put(self, status: PutStatus, started: float) -> None:
        """One put call (``put``, ``put_batch`` or ``put_async``) that began at ``started``
        (``time.perf_counter()``) and ended now with ``status``."""
        self.put_latency.labels(status.name).observe(time.perf_counter() - started)

    def serve(self, port: int, address: str = "127.0.0.1") -> BrokerMetrics:
        """Serves ``/metrics`` and ``/status`` on ``address:port`` (0 picks a free port); a
        second call while serving is the same server."""
        if self._server is not None:
            return self
        metrics = make_wsgi_app(self.registry)

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            if environ.get("PATH_INFO") != "/status":
                return metrics(environ, start_response)  # type: ignore[no-any-return]
            body = json.dumps(self.status()).encode()
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]

        self._server = make_server(
            address, port, app, ThreadingWSGIServer, handler_class=_QuietHandler
        )
        server = self._server
        # Stopped by `server.shutdown()` in `close`, which returns once `serve_forever` did.
        ServiceThread("rocketha-metrics", lambda _: server.serve_forever()).start()
        self.port = self._server.server_port
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def collect(self) -> Iterator[Metric]:
        status = self.status()
        labels = ["broker", "role"]
        base = [status["broker_name"], status["role"]]
        for name, doc in (("max_offset", "Commit log max offset"), ("min_offset", "Min offset")):
            g = GaugeMetricFamily(f"rocketha_{name}", doc, labels=labels)
            g.add_metric(base, status[name])
            yield g
        if "timer" in status:
            timer = status["timer"]
            for name, key, doc in (
                ("timer_pending", "pending", "Timer messages waiting for their time"),
                ("timer_enqueue_behind", "enqueue_behind", "Timer messages not placed yet"),
                ("timer_delivered", "delivered", "Timer messages delivered since start"),
                ("timer_last_lateness_ms", "last_lateness_ms", "Lateness of the last delivery"),
                ("timer_max_lateness_ms", "max_lateness_ms", "Worst lateness since start"),
            ):
                g = GaugeMetricFamily(f"rocketha_{name}", doc, labels=labels)
                g.add_metric(base, timer[key])
                yield g
        if "connections" in status:
            push = GaugeMetricFamily(
                "rocketha_push2slave_max_offset", "Highest offset a slave acked", labels=labels
            )
            push.add_metric(base, status["push2slave_max_offset"])
            yield push
            keys = ["slave"]
            ack = GaugeMetricFamily("rocketha_slave_ack_offset", "Slave ack offset", labels=keys)
            lag = GaugeMetricFamily("rocketha_slave_lag_bytes", "Bytes behind master", labels=keys)
            sent = GaugeMetricFamily("rocketha_bytes_replicated", "Bytes sent", labels=keys)
            state = GaugeMetricFamily(
                "rocketha_ha_connection_state",
                "1 for the connection's state",
                labels=[*keys, "state"],
            )
            for c in status["connections"]:
                ack.add_metric([c["address"]], c["slave_ack_offset"])
                lag.add_metric([c["address"]], c["lag_bytes"])
                sent.add_metric([c["address"]], c["bytes_sent"])
                state.add_metric([c["address"], c["state"]], 1)
            yield from (ack, lag, sent, state)
        else:
            recv = GaugeMetricFamily("rocketha_bytes_replicated", "Bytes received", labels=labels)
            recv.add_metric(base, status.get("bytes_received", 0))
            yield recv
            state = GaugeMetricFamily(
                "rocketha_ha_connection_state",
                "1 for the client's state",
                labels=[*labels, "state"],
            )
            state.add_metric([*base, status.get("state", "")], 1)
            yield state
            stop = status.get("stopped")
            if stop is not None:
                stopped = GaugeMetricFamily(
                    "rocketha_ha_replication_stopped_offset",
                    "A STOPPED slave: the offset of the record its master keeps sending that "
                    "fails validation",
                    labels=[*labels, "master", "reason"],
                )
                stopped.add_metric([*base, stop["master"], stop["reason"]], stop["offset"])
                yield stopped
