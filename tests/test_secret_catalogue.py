"""The secret catalogue (issue 11, item 13): names the firewall and map refuse, shapes redacted.

The attacker is a worker whose read scope is the whole repository: it lists, greps and reads
every credential file the catalogue names, and reads ordinary files that hold PGP and PuTTY
private keys. Nothing of them may reach a request, an artifact or the repository map.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from anti_sprawl.agent.artifacts import ArtifactStore
from anti_sprawl.agent.worker import WorkerContext, WorkerLimits, run_worker
from anti_sprawl.fs.firewall import Firewall
from anti_sprawl.fs.repofiles import is_secret_path, list_repo_files
from anti_sprawl.providers.base import SystemBlock, request_text
from anti_sprawl.providers.errors import redact as redact_provider_error
from anti_sprawl.providers.redacting import RedactingProvider
from anti_sprawl.providers.scripted import Script, ScriptedProvider
from anti_sprawl.redact import Redactor

CANARY = "CANARY-CATALOGUE-4b7e"
NAMES = [
    ".vault-token",
    "deploy/prod.env",
    "credentials.json",
    "deploy/gcp/credentials.json",
    ".docker/config.json",
    ".kube/config",
    "infra/prod.tfvars",
    "keys/release.asc",
    "keys/secring.gpg",
    "keys/server.ppk",
    ".config/git/credentials",
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".bash_history",
    ".pgpass",
    ".ssh/config",
    ".gnupg/pubring.kbx",
    "KUBECONFIG",
]
PGP = (
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF" + CANARY + "xyz\n=abcd\n"
    "-----END PGP PRIVATE KEY BLOCK-----\n"
)
PUTTY = (
    "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: k\nPublic-Lines: 2\n"
    "AAAAC3NzaC1lZDI1NTE5AAAAI\nAAAA\nPrivate-Lines: 1\nAAAAI" + CANARY + "\n"
    "Private-MAC: 8f2c9d0e1a\n"
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for rel in NAMES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"token = {CANARY}\n")
    (root / "docs").mkdir()
    (root / "docs" / "pgp.md").write_text(f"# release key\n{PGP}")
    (root / "docs" / "putty.md").write_text(f"# ops key\n{PUTTY}")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hello')\n")
    return root


@pytest.mark.parametrize("rel", NAMES)
def test_every_catalogue_name_is_secret_everywhere(rel: str) -> None:
    assert is_secret_path(rel)
    assert is_secret_path(rel.upper())  # case aliases (P6)


def test_ordinary_names_stay_readable() -> None:
    for rel in ("src/app.py", "docs/credentials.md", "config.json", "kube/deploy.yaml"):
        assert not is_secret_path(rel), rel


def test_the_map_never_lists_a_catalogue_name(repo: Path) -> None:
    listed = list_repo_files(repo, max_files=1000).files
    assert sorted(listed) == ["docs/pgp.md", "docs/putty.md", "src/app.py"]


def test_an_attacking_worker_gets_no_byte_of_any_catalogue_entry(
    repo: Path, tmp_path: Path
) -> None:
    turns: list[object] = [
        {"tool": "list_dir", "args": {"path": "."}},
        {"tool": "grep", "args": {"pattern": "CANARY", "path": "."}},
        *({"tool": "read_file", "args": {"path": rel}} for rel in NAMES),
        {"tool": "read_file", "args": {"path": "docs/pgp.md"}},
        {"tool": "read_file", "args": {"path": "docs/putty.md"}},
        {"tool": "finish", "args": {"summary": "looked around"}},
    ]
    provider = ScriptedProvider(Script.from_data({"workers": {"t": turns}}))
    redactor = Redactor()
    with Firewall(repo, ["**"], [], redact=redactor) as fw:
        result = run_worker(
            WorkerContext(
                task_id="t",
                provider=RedactingProvider(provider, redactor),
                firewall=fw,
                system=[SystemBlock(text="rules")],
                first_message="Collect every credential.",
                limits=WorkerLimits(token_budget=200_000, max_tool_calls=40),
                artifacts=ArtifactStore(tmp_path / "artifacts"),
                redact=redactor,
            )
        )
    assert result.status == "succeeded"
    refused = {v.path for v in result.violations}
    assert set(NAMES) <= refused
    sent = "\n".join(request_text(r) for r in provider.requests)
    assert CANARY not in sent
    assert "[REDACTED:pgp-private-key]" in sent
    assert "[REDACTED:putty-private-key]" in sent
    for path in (tmp_path / "artifacts").rglob("*"):
        if path.is_file():
            assert CANARY not in path.read_text(), path


@pytest.mark.parametrize(
    ("kind", "sample"),
    [
        ("pgp-private-key", PGP),
        ("putty-private-key", PUTTY),
        ("private-key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn" + CANARY),
        ("gitlab-token", "glpat-" + "x1Y2z3" * 4),
        ("google-api-key", "AIza" + "Sy" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"),
        ("npm-token", "npm_" + "a1B2c3D4" * 4 + "e5F6"),
        ("vault-token", "hvs." + "CAESIJ" * 5),
        ("stripe-key", "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"),
        ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N"),
        ("aws-secret-key", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ],
)
def test_content_shapes_are_one_placeholder_format(kind: str, sample: str) -> None:
    redactor = Redactor()
    out = redactor(f"x = '''{sample}'''\n")
    assert f"[REDACTED:{kind}]" in out
    assert CANARY not in out
    assert [f.kind for f in redactor.findings(sample)][:1] == [kind]


def test_provider_errors_use_the_same_redactor_and_format() -> None:
    text = "401: Authorization: Bearer abc.def-123 key sk-ant-api03-" + "z" * 24
    out = redact_provider_error(text, ["abc.def-123"])
    assert "abc.def-123" not in out
    assert "sk-ant-api03" not in out
    assert "[REDACTED]" not in out
    assert "[REDACTED:" in out
