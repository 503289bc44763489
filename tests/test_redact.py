"""Secrets inside ordinary files never reach a model request, a transcript or the branch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from anti_sprawl.agent.artifacts import ArtifactStore
from anti_sprawl.agent.worker import WorkerContext, WorkerLimits, run_worker
from anti_sprawl.fs.firewall import Firewall
from anti_sprawl.providers.base import SystemBlock, request_text
from anti_sprawl.providers.redacting import RedactingProvider
from anti_sprawl.providers.scripted import Script, ScriptedProvider
from anti_sprawl.redact import SECRET_SHAPES, Redactor, env_secrets

from . import e2e_fixture as fx

KEY = "CANARY-KEY-5d1e9a77b2"
SAMPLES = {
    "aws-access-key": "AKIAIOSFODNN7EXAMPLE",
    "github-token": "ghp_" + "a1B2" * 9,
    "private-key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    "url-password": "postgres://admin:hunter2hunter2@db.internal/app",
    "slack-token": "xoxb-123456789012-abcdefghij",
}


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_known_shapes_are_redacted(kind: str) -> None:
    out = Redactor()(f"config = {SAMPLES[kind]!r}\n")
    assert f"[REDACTED:{kind}]" in out
    secret = (
        SAMPLES[kind].split("://")[-1].split("@")[0] if kind == "url-password" else SAMPLES[kind]
    )
    assert secret not in out


# One text of every shape in the catalogue: each is still found with the skip of shapes
# whose fixed text is absent (redact._NEEDS).
EVERY_SHAPE = {
    **SAMPLES,
    "pgp-private-key": "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----",
    "putty-private-key": "PuTTY-User-Key-File-3: ssh-ed25519\nPrivate-Lines: 1\nAAAA\nPrivate-MAC: 8f",
    "aws-secret-key": "AWS_Secret_Access_Key = " + "A1b2/+=x" * 5,
    "gitlab-token": "glpat-" + "a1B2_" * 4,
    "slack-webhook": "https://hooks.slack.com/services/T0000/B0000/" + "x" * 20,
    "anthropic-key": "sk-ant-" + "a1B2-" * 5,
    "openai-key": "sk-proj-" + "a1B2_" * 5,
    "stripe-key": "rk_live_" + "a1B2" * 4,
    "google-api-key": "AIza" + "a1B2_" * 7,
    "npm-token": "npm_" + "a1B2" * 9,
    "pypi-token": "pypi-AgEIcHlwaS5vcmc" + "a1B2_" * 10,
    "vault-token": "hvb." + "a1B2_" * 5,
    "huggingface-token": "hf_" + "a1B2" * 9,
    "jwt": "eyJ" + "a" * 10 + ".eyJ" + "b" * 10 + "." + "c" * 10,
}


def test_every_shape_of_the_catalogue_is_found() -> None:
    assert set(EVERY_SHAPE) == {kind for kind, _ in SECRET_SHAPES}
    for kind, secret in EVERY_SHAPE.items():
        out = Redactor()(f"x = 1\nconfig = {secret!r}\n")
        assert f"[REDACTED:{kind}]" in out, kind
    # github's long form, a second stripe prefix and vault kind, an ASIA key
    for secret in ("github_pat_" + "a1B2_" * 5, "sk_live_" + "a" * 16, "hvs." + "a" * 24):
        assert secret not in Redactor()(f"({secret})"), secret
    assert "ASIA" + "A" * 16 not in Redactor()("ASIA" + "A" * 16)


def test_benign_code_is_untouched() -> None:
    text = (
        "def task_handler(key: str) -> None:\n"
        "    sha = '3f786850e387550fdab836ed7e6dc881de23001b'\n"
        "    url = 'https://example.com/path'\n"
        "    token_count = 12\n"
    )
    assert Redactor([])(text) == text


def test_env_secrets_pick_secret_names_only() -> None:
    env = {
        "ANTHROPIC_API_KEY": KEY,
        "GITHUB_TOKEN": "t0ken-value-long",
        "PATH": "/usr/bin:/bin",
        "X_KEY": "short",
    }
    assert env_secrets(env) == sorted([KEY, "t0ken-value-long"], key=len, reverse=True)


def test_worker_never_shows_or_writes_back_secrets(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    original = f"API = '{KEY}'\nAWS = '{SAMPLES['aws-access-key']}'\n"
    (repo / "src" / "config.py").write_text(original)
    turns = [
        {"tool": "read_file", "args": {"path": "src/config.py"}},
        {
            "tool": "write_file",
            "args": {"path": "src/config.py", "content": "API = '[REDACTED:env]'\n"},
        },
        {"tool": "finish", "args": {"summary": "looked"}},
    ]
    provider = ScriptedProvider(Script.from_data({"workers": {"t": turns}}))
    redactor = Redactor([KEY])
    artifacts = ArtifactStore(tmp_path / "artifacts")
    with Firewall(repo, [], ["src/config.py"]) as fw:
        ctx = WorkerContext(
            task_id="t",
            provider=RedactingProvider(provider, redactor),
            firewall=fw,
            system=[SystemBlock(text=f"rules (the key is {KEY})")],
            first_message="Check the config.",
            limits=WorkerLimits(token_budget=20_000, max_tool_calls=5),
            artifacts=artifacts,
            redact=redactor,
        )
        result = run_worker(ctx)
    assert result.status == "succeeded"
    sent = "\n".join(request_text(r) for r in provider.requests)
    assert KEY not in sent
    assert SAMPLES["aws-access-key"] not in sent
    assert "[REDACTED:env]" in sent
    assert "[REDACTED:aws-access-key]" in sent
    assert (repo / "src" / "config.py").read_text() == original  # placeholder never written back
    assert any("placeholder" in e for e in result.tool_errors)
    for path in (tmp_path / "artifacts").rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text()


def test_cli_run_keeps_env_key_out_of_every_artifact_and_commit(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    (repo / "pkg" / "settings.py").write_text(f"KEY = '{KEY}'\n")
    fx.git(repo, "add", "-A")
    fx.git(repo, "-c", "user.name=t", "-c", "user.email=t@l", "commit", "-qm", "settings")
    plan = fx.plan()
    plan["tasks"][0]["read_scope"] = ["pkg/base.py", "pkg/settings.py"]
    script = fx.script()
    script["workers"]["a"].insert(0, {"tool": "read_file", "args": {"path": "pkg/settings.py"}})
    plan_path, script_path = fx.write_inputs(tmp_path, plan, script)
    env = dict(
        os.environ, ANTHROPIC_API_KEY=KEY, PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin"
    )
    args = [sys.executable, "-m", "anti_sprawl", "execute", str(plan_path), "--repo", str(repo)]
    done = subprocess.run(
        [*args, "--script", str(script_path)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert KEY not in done.stdout + done.stderr
    for path in (repo / ".anti-sprawl").rglob("*"):
        if path.is_file() and path.name != "run.lock":
            assert KEY not in path.read_text(errors="replace"), path
    assert KEY not in fx.git(repo, "log", "-p", "main..anti-sprawl/demo")


def test_a_change_that_adds_a_secret_is_not_committed(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    turns = fx.worker_turns("pkg/a.py", f"AWS_KEY = '{SAMPLES['aws-access-key']}'\n")
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script(a=turns))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin")
    args = [sys.executable, "-m", "anti_sprawl", "execute", str(plan_path), "--repo", str(repo)]
    done = subprocess.run(
        [*args, "--script", str(script_path)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    shown = " ".join(done.stdout.split())  # lines are broken at spaces within 80 columns
    assert "failed (secret)" in shown
    assert "aws-access-key in pkg/a.py" in shown
    assert SAMPLES["aws-access-key"] not in fx.git(repo, "log", "-p", "--all")
    assert sorted(fx.task_trailers(repo)) == ["b"]


class _CountingRedactor(Redactor):
    """The real redactor, counting its scans (a subclass, not a patch)."""

    scans = 0

    def _redact(self, text: str) -> str:
        self.scans += 1
        return super()._redact(text)


def test_each_text_is_scanned_once_short_ones_too() -> None:
    redactor = _CountingRedactor(["hunter2hunter2"])
    # Short texts (a schema's "string", a short URL with a password, an env value) are kept
    # under themselves, longer ones under their digest: every distinct text is scanned once.
    texts = ["string", "x://u:pw@h", "hunter2hunter2", "a longer text, past the short cut"]
    first = [redactor(t) for t in texts]
    again = [redactor(t) for t in texts * 3]
    assert redactor.scans == len(texts)
    assert again == first * 3
    assert first[:3] == ["string", "x://[REDACTED:url-password]@h", "[REDACTED:env]"]
    assert first[3] == texts[3]


def test_an_immutable_model_with_nothing_to_redact_is_kept_and_the_rest_copied() -> None:
    """Redactor.model (issue 29): frozen parts with nothing to redact are not copied; a
    secret anywhere is still replaced, and a mutable model is still a copy."""
    from anti_sprawl.context.manifest import ContextItem, DroppedItem
    from anti_sprawl.run.result import TaskResult

    redactor = Redactor([KEY])
    item = ContextItem(
        item_id="file:a.py",
        kind="file",
        source="a.py",
        trust="untrusted",
        tokens=3,
        sha256="0" * 64,
    )
    assert redactor.model(item) is item
    again = item.model_copy()  # an equal model: known to hold nothing to redact
    assert redactor.model(again) is again
    leaky = item.model_copy(update={"source": f"a.py {KEY}"})
    assert redactor.model(leaky).source == "a.py [REDACTED:env]"
    record = TaskResult(task_id="t", message=f"saw {KEY}", files_changed=["a.py"])
    clean = redactor.model(record)
    assert clean is not record
    assert clean.files_changed is not record.files_changed
    assert clean.message == "saw [REDACTED:env]"
    assert KEY in record.message
    drop = DroppedItem(item_id="x", kind="file", source=KEY, tokens=0, reason="denied")
    assert redactor.model([item, drop])[1].source == "[REDACTED:env]"  # type: ignore[arg-type]


def test_a_request_with_nothing_to_redact_is_sent_as_it_is() -> None:
    from anti_sprawl.providers.base import ModelRequest, ToolResult, ToolResultMessage, UserMessage
    from anti_sprawl.providers.redacting import redact_request

    redactor = Redactor([KEY])
    first = UserMessage(content="Do the task.")
    request = ModelRequest(
        system=[SystemBlock(text="rules")],
        messages=[first, ToolResultMessage(results=[ToolResult(call_id="1", content="ok")])],
    )
    assert redact_request(redactor, request) is request
    leaky = request.model_copy(
        update={
            "messages": [first, ToolResultMessage(results=[ToolResult(call_id="1", content=KEY)])]
        }
    )
    sent = redact_request(redactor, leaky)
    assert KEY not in request_text(sent)
    assert sent.messages[0] is first


def test_kept_request_parts_are_per_redactor_and_by_content(tmp_path: Path) -> None:
    """context/requests.py keeps each part's redacted JSON by its content, per redactor: a
    redactor that knows a secret never gets another one's text of the same part."""
    from anti_sprawl.context.requests import load_request, save_request
    from anti_sprawl.providers.base import ModelRequest, UserMessage

    request = ModelRequest(
        system=[SystemBlock(text="rules")], messages=[UserMessage(content=f"key {KEY}")]
    )
    save_request(tmp_path / "a", "t", 1, request, Redactor([]))
    save_request(tmp_path / "b", "t", 1, request, Redactor([KEY]))
    save_request(tmp_path / "b", "t", 2, request, Redactor([KEY]))
    plain, *redacted = (
        load_request(tmp_path / d, "t", n) for d, n in (("a", 1), ("b", 1), ("b", 2))
    )
    assert plain is not None
    assert plain["messages"][0]["content"] == f"key {KEY}"
    for kept in redacted:
        assert kept is not None
        assert kept["messages"][0]["content"] == "key [REDACTED:env]"
    for path in (tmp_path / "b").rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text()
