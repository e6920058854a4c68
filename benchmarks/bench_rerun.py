"""``intentusnet rerun --all``: records re-run a second, memory, output size.

Run: python benchmarks/bench_rerun.py [--records 10000] [--jobs 2] [--dir PATH] [--llm]

Records ``--records`` executions of a 5-step agent (in a temporary directory
unless ``--dir`` is given; a tmpfs such as /dev/shm leaves the disk out; with
``--llm`` its summary is two chat-completion calls through the httpx
recording transport to a stand-in model, each recorded as a step of the agent
and as a record of its own, which a re-run skips), then
runs ``intentusnet rerun --all --jobs N`` over them as a user would, in its
own process, and prints:

  * the wall time and records re-run a second (target >= 500/s with 2 jobs),
    and the CPU time of all its processes: on a shared machine, the CPU time a
    record takes says what two idle cores would do;
  * the peak memory over all its processes: the sum of the resident sizes of
    the command and its workers, sampled every 20 ms (target <= 200 MiB);
  * the bytes it printed when every record is ``same``, for a tenth of the
    records and for all of them: equal when the output does not grow with N.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent

APP = textwrap.dedent(
    """
    from intentusnet import IntentRouter, open_store, step

    @step("fetch")
    def fetch(n: int) -> dict:
        return {"n": n, "items": list(range(n % 7))}

    @step("score")
    def score(items: list) -> int:
        return sum(items)

    @step("llm.summarize")
    def summarize(n: int, total: int) -> str:
        return f"ticket {n} scored {total}"

    @step("kb.search")
    def search(text: str) -> list:
        return [text[:8]]

    @step("email.send", side_effect=True)
    def send(to: str, body: str) -> dict:
        return {"sent": True}

    router = IntentRouter(store=open_store())

    @router.agent("bench.five", name="five")
    def five(envelope, ctx):
        n = envelope.payload["n"]
        got = fetch(n)
        total = score(got["items"])
        text = summarize(n, total)
        articles = search(text)
        send(f"user{n}@example.com", text)
        return {"text": text, "articles": articles}
    """
)


#: ``--llm``: the summary is two recorded HTTP calls to a chat-completion API.
LLM_APP = textwrap.dedent(
    """
    import httpx
    from intentusnet import IntentRouter, open_store, step
    from intentusnet.integrations.httpx import RecordingTransport

    def model(request):
        asked = request.read().decode()[-40:]
        return httpx.Response(200, json={
            "id": "cmpl-1",
            "choices": [{"message": {"role": "assistant", "content": "gist " + asked}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28},
        })

    store = open_store()
    llm = httpx.Client(transport=RecordingTransport(
        store, mode="record", wrapped=httpx.MockTransport(model)
    ))

    def chat(prompt):
        body = {"model": "m", "messages": [{"role": "user", "content": prompt}]}
        answer = llm.post("https://llm.example/v1/chat/completions", json=body)
        return answer.json()["choices"][0]["message"]["content"]

    @step("fetch")
    def fetch(n: int) -> dict:
        return {"n": n, "items": list(range(n % 7))}

    @step("score")
    def score(items: list) -> int:
        return sum(items)

    @step("kb.search")
    def search(text: str) -> list:
        return [text[:8]]

    @step("email.send", side_effect=True)
    def send(to: str, body: str) -> dict:
        return {"sent": True}

    router = IntentRouter(store=store)

    @router.agent("bench.five", name="five")
    def five(envelope, ctx):
        n = envelope.payload["n"]
        got = fetch(n)
        total = score(got["items"])
        text = chat(f"shorten: {chat(f'ticket {n} scored {total}')}")
        articles = search(text)
        send(f"user{n}@example.com", text)
        return {"text": text, "articles": articles}
    """
)


def _record(directory: Path, records: int) -> None:
    """Record ``records`` executions with the application, in this process."""
    sys.path.insert(0, str(directory))
    os.environ["INTENTUSNET_STORE"] = str(directory / "records")
    import benchapp  # type: ignore[import-not-found]

    started = time.perf_counter()
    for n in range(records):
        benchapp.router.route_intent(
            {"intent": {"name": "bench.five"}, "payload": {"n": n}}
        )
    benchapp.router.close()
    elapsed = time.perf_counter() - started
    print(f"  recorded {records:,} executions in {elapsed:.1f} s")


def _run(
    directory: Path, jobs: int, limit: int | None
) -> tuple[float, float, int, int, int]:
    """Run ``rerun --all``: wall and CPU time, peak memory, exit code, bytes out."""
    command = [
        sys.executable, "-m", "intentusnet.cli", "--store", "records",
        "rerun", "--all", "--app", "benchapp:router", "--jobs", str(jobs),
    ]  # fmt: skip
    if limit is not None:
        command += ["--limit", str(limit)]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{directory}"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=directory, env=env, stdout=out)
        peak = _watch(process)
        elapsed = time.perf_counter() - started
        out.seek(0)
        printed = len(out.read())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return elapsed, cpu, peak, process.returncode, printed


def _watch(process: subprocess.Popen[bytes]) -> int:
    """The peak of the summed resident sizes of ``process`` and its children."""
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        root = psutil.Process(process.pid)
        while not done.is_set():
            try:
                tree = [root, *root.children(recursive=True)]
                total = sum(p.memory_info().rss for p in tree)
            except psutil.Error:
                total = 0
            peak = max(peak, total)
            time.sleep(0.02)

    thread = threading.Thread(target=sample)
    thread.start()
    process.wait()
    done.set()
    thread.join()
    return peak


def main() -> None:
    """Record, re-run every record, print the figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--llm", action="store_true", help="two LLM calls each")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as name:
        directory = Path(name)
        (directory / "benchapp.py").write_text(LLM_APP if args.llm else APP)
        calls = ", two recorded LLM calls each" if args.llm else ""
        print(f"rerun --all, a 5-step agent{calls}, --jobs {args.jobs}")
        _record(directory, args.records)
        # A tenth of the executions: with --llm each has three records.
        tenth = args.records // 10 * (3 if args.llm else 1)
        small, cpu_small, peak_small, code_small, printed_small = _run(
            directory, args.jobs, tenth
        )
        elapsed, cpu, peak, code, printed = _run(directory, args.jobs, None)
        assert code == code_small == 0, "every record should be the same"
        rate = args.records / elapsed
        print(f"  {args.records:,} executions re-run in {elapsed:.2f} s: {rate:,.0f}/s")
        # The CPU time the re-runs took beyond the run over a tenth of the
        # records (start-up, imports) says what 2 idle cores would do.
        per = (cpu - cpu_small) / (args.records - args.records // 10) * 1000
        print(
            f"  CPU time over all processes: {cpu:.1f} s ({cpu_small:.1f} s for a "
            f"tenth); {per:.2f} ms an execution beyond start-up"
        )
        print(f"  peak memory over all processes: {peak / 2**20:.0f} MiB")
        print(
            f"  printed: {printed_small} bytes for {args.records // 10:,} records "
            f"({small:.2f} s, {peak_small / 2**20:.0f} MiB), {printed} bytes for "
            f"{args.records:,}"
        )


if __name__ == "__main__":
    main()
