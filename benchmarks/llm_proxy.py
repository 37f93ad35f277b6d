"""What the language-model proxy costs per request: requests per second through it against direct.

    python benchmarks/llm_proxy.py [--requests 400] [--concurrency 8]

A sandboxed LLM component reaches its server through two hops the harness adds
(:mod:`openpert.run.llm_proxy`): the launcher's relay (a loopback port -> the proxy's Unix socket,
in the job's process) and the proxy (Unix socket -> the server, counting usage). This script runs a
client under the real launcher (:data:`openpert.run.component.FAST_EXIT_LAUNCHER`, with the relay
switched on; unsandboxed, so that only the two hops differ) against the project's OpenAI stub
server (``openpert.testing.llm_server``), and sends the same chat requests straight to the server
and through relay and proxy, one at a time and ``--concurrency`` at a time. It prints requests per
second of each and their ratio (through / direct: 1 costs nothing), and the extra milliseconds per
request, and writes them to ``benchmarks/results/llm_proxy.json``.

The stub answers in well under a millisecond, so the ratio is the worst case: against a real model
(hundreds of milliseconds a request) the added time per request is what matters.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))

from figures import write_figures  # noqa: E402

from openpert.run.component import FAST_EXIT_LAUNCHER  # noqa: E402
from openpert.run.llm_proxy import ENV_RELAY, LLMProxy  # noqa: E402
from openpert.testing.llm_server import OpenAIStubServer  # noqa: E402

#: The client, run by the launcher: times ``n`` chat requests to each URL, sequential and concurrent.
CLIENT = textwrap.dedent("""
    import concurrent.futures, json, sys, time, urllib.request
    n, concurrency, urls = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    body = json.dumps({"model": "stub-model", "messages": [{"role": "user", "content": "name one gene"}]}).encode()

    def one(url):
        request = urllib.request.Request(url + "/chat/completions", data=body, headers={"Content-Type": "application/json"})
        with opener.open(request, timeout=30) as response:
            return json.loads(response.read())["usage"]["completion_tokens"]

    timings = {}
    for label, url in zip(("direct", "proxied"), urls):
        one(url)  # warm up
        for workers in (1, concurrency):
            start = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(workers) as pool:
                assert all(t > 0 for t in pool.map(one, [url] * n))
            timings[f"{label}_{workers}"] = n / (time.perf_counter() - start)
    print(json.dumps(timings))
""")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400, help="requests per measurement")
    parser.add_argument("--concurrency", type=int, default=8, help="simultaneous requests of the concurrent measurement")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="openpert-llm-proxy-bench-") as tmp, OpenAIStubServer() as server:
        script = Path(tmp) / "client.py"
        script.write_text(CLIENT)
        port = free_port()
        with LLMProxy(server.base_url, Path(tmp) / "llm.sock") as proxy:
            env = {**os.environ, ENV_RELAY: f"{proxy.socket_path} {port}"}
            done = subprocess.run([sys.executable, "-c", FAST_EXIT_LAUNCHER, "-1", "-1", str(script), str(args.requests),
                                   str(args.concurrency), server.base_url, proxy.job_base_url(port)],
                                  env=env, capture_output=True, text=True, timeout=600)
            counted = proxy.counts
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            return 1
    rates = json.loads(done.stdout.strip().splitlines()[-1])
    expected = 2 * args.requests + 1  # each measurement, and one warm-up
    if counted["requests"] != expected:
        sys.stderr.write(f"the proxy counted {counted['requests']} requests, {expected} were sent\n")
        return 1
    figures: dict[str, float] = {}
    for workers in (1, args.concurrency):
        direct, proxied = rates[f"direct_{workers}"], rates[f"proxied_{workers}"]
        figures[f"ratio_{workers}"] = round(proxied / direct, 3)
        figures[f"added_ms_{workers}"] = round(1000 * (1 / proxied - 1 / direct), 3)
        print(f"{workers} at a time: direct {direct:7.0f} req/s, through relay and proxy {proxied:7.0f} req/s, "
              f"ratio {proxied / direct:.2f}, {figures[f'added_ms_{workers}']:.2f} ms more per request")
    dest = write_figures("llm_proxy", figures, rates=rates, requests=args.requests, counted=counted)
    print(f"figures written to {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
