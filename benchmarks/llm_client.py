"""Requests per second of the project's language-model client against the ``openai`` package's ``AsyncOpenAI``.

    python benchmarks/llm_client.py [--requests 2000] [--concurrency 8] [--repeats 3]

Both clients send the same chat requests (``max_tokens`` 1) to the project's OpenAI stub server
(``openpert.testing.llm_server``, HTTP/1.1 with keep-alive, answering at once), run in a process of
its own so that it does not share the clients' interpreter, at the same concurrency:
:class:`pertsci.llm.LLMClient` (cache off, ``max_concurrency`` threads, kept-alive connections of
:mod:`pertsci.llm_http`) and ``openai.AsyncOpenAI`` (httpx's connection pool, ``--concurrency``
requests in flight through an ``asyncio`` semaphore). Each is measured ``--repeats`` times,
alternating; the median requests per second of each and their ratio (project / openai: the goal is
>= 1.0) are printed and written to ``benchmarks/results/llm_client.json``.

The stub answers in well under a millisecond, so the figures measure the clients' own cost per
request, which against a real model (tens to thousands of milliseconds a request) is small.
Needs the ``openai`` package (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))

from figures import write_figures  # noqa: E402

from pertsci.llm import LLMClient, SamplingParams  # noqa: E402

#: The server process: a stub answering "ok", its base URL on standard output, until standard input closes.
SERVER = """
import sys
from openpert.testing.llm_server import OpenAIStubServer
with OpenAIStubServer(lambda request: "ok", model="bench-model") as server:
    print(server.base_url, flush=True)
    sys.stdin.read()
"""
MODEL = "bench-model"


def project_rate(base_url: str, n: int, concurrency: int) -> float:
    """Requests per second of :class:`pertsci.llm.LLMClient` sending ``n`` distinct prompts."""
    client = LLMClient(base_url=base_url, model=MODEL, cache_dir=None, max_concurrency=concurrency, max_retries=0,
                       batch_size=n)
    sampling = SamplingParams(max_tokens=1, temperature=0.0)
    client.generate([f"warm-up {i}" for i in range(concurrency)], sampling)
    prompts = [f"name gene {i}" for i in range(n)]
    start = time.perf_counter()
    answers = client.generate(prompts, sampling)
    elapsed = time.perf_counter() - start
    client.close()
    if answers != [["ok"]] * n:
        raise RuntimeError("the project's client got other answers than the stub's")
    return n / elapsed


def openai_rate(base_url: str, n: int, concurrency: int) -> float:
    """Requests per second of ``openai.AsyncOpenAI`` sending ``n`` distinct prompts, ``concurrency`` at a time."""
    import openai

    async def run() -> float:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="none", max_retries=0)
        gate = asyncio.Semaphore(concurrency)

        async def one(prompt: str) -> str:
            async with gate:
                reply = await client.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": prompt}], max_tokens=1, temperature=0.0)
                return reply.choices[0].message.content

        await asyncio.gather(*(one(f"warm-up {i}") for i in range(concurrency)))
        start = time.perf_counter()
        answers = await asyncio.gather(*(one(f"name gene {i}") for i in range(n)))
        elapsed = time.perf_counter() - start
        await client.close()
        if answers != ["ok"] * n:
            raise RuntimeError("openai's client got other answers than the stub's")
        return n / elapsed

    return asyncio.run(run())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per measurement")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight at once, for both clients")
    parser.add_argument("--repeats", type=int, default=3, help="measurements of each client (the median is kept)")
    args = parser.parse_args()
    try:
        import openai
    except ImportError:
        sys.stderr.write("needs the openai package: pip install -e '.[bench]'\n")
        return 2
    common = str(Path(__file__).resolve().parents[1] / "common")
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env={"PYTHONPATH": common, "PATH": "/usr/bin:/bin"})
    try:
        base_url = server.stdout.readline().strip()
        if not base_url.startswith("http://127.0.0.1:"):
            sys.stderr.write(f"the stub server did not start (it printed {base_url!r})\n")
            return 1
        rates: dict[str, list[float]] = {"project": [], "openai": []}
        for _ in range(args.repeats):
            rates["project"].append(project_rate(base_url, args.requests, args.concurrency))
            rates["openai"].append(openai_rate(base_url, args.requests, args.concurrency))
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    project, reference = statistics.median(rates["project"]), statistics.median(rates["openai"])
    print(f"{args.requests} requests, {args.concurrency} at a time, median of {args.repeats}: "
          f"project {project:7.0f} req/s, openai {openai.__version__} {reference:7.0f} req/s, ratio {project / reference:.2f}")
    figures = {"project_rps": round(project, 1), "openai_rps": round(reference, 1), "ratio": round(project / reference, 3)}
    dest = write_figures("llm_client", figures, rates=rates, requests=args.requests, concurrency=args.concurrency,
                         openai_version=openai.__version__)
    print(f"figures written to {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
