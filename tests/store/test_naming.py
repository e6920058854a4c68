"""open_store: a postgresql:// URL or a path, one way to name a store."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from intentusnet.store import FileExecutionStore, PostgresExecutionStore, open_store
from intentusnet.store.naming import is_url, public_url


def test_path_opens_a_file_store(tmp_path: Path) -> None:
    """A path, str or Path, gives a FileExecutionStore with that root."""
    for name in (tmp_path, str(tmp_path)):
        store = open_store(name)
        assert isinstance(store, FileExecutionStore)
        assert store.root == tmp_path


def test_none_is_the_environment_then_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """None reads INTENTUSNET_STORE (a URL too), else .intentusnet/records."""
    monkeypatch.delenv("INTENTUSNET_STORE", raising=False)
    assert open_store(None).root == Path(".intentusnet/records")
    monkeypatch.setenv("INTENTUSNET_STORE", str(tmp_path))
    assert open_store(None).root == tmp_path
    monkeypatch.setenv("INTENTUSNET_STORE", "postgres://u@127.0.0.1:1/db")
    assert isinstance(open_store(None), PostgresExecutionStore)


def test_without_create_a_missing_or_file_path_is_refused(tmp_path: Path) -> None:
    """create=False refuses a missing directory and a file; nothing is made."""
    with pytest.raises(FileNotFoundError, match="no execution store"):
        open_store(tmp_path / "missing", create=False)
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        open_store(tmp_path / "file", create=False)
    assert not (tmp_path / "missing").exists()


def test_urls_open_a_postgres_store_without_connecting() -> None:
    """Both schemes give a PostgresExecutionStore; nothing connects until used."""
    for url in ("postgresql://u:pw@127.0.0.1:1/db", "postgres://u@127.0.0.1:1/db"):
        assert is_url(url)
        store = open_store(url)
        assert isinstance(store, PostgresExecutionStore)
        assert store.where == "PostgreSQL at 127.0.0.1:1/db"
    assert not is_url("records/postgresql://x")
    assert not is_url(Path("postgresql:/x"))


def test_malformed_url_is_a_value_error_without_the_password() -> None:
    """A bad escape or port is a ValueError whose message hides the password."""
    for url in (
        "postgresql://u:se%zzcret@h/db",
        "postgresql://u:secret@h:x/db",
        "POSTGRESQL://u:secret@h/db",  # libpq knows the schemes in lower case
    ):
        with pytest.raises(ValueError, match="malformed PostgreSQL URL") as caught:
            open_store(url)
        assert "secret" not in str(caught.value)
        assert caught.value.__cause__ is None


def test_public_url_drops_the_password() -> None:
    """The user stays, the password goes, from the user-info and the parameters."""
    assert public_url("postgresql://app:p:w@h:5/db?password=x&a=b") == (
        "postgresql://app@h:5/db?password=***&a=b"
    )
    assert public_url("postgresql://h/db") == "postgresql://h/db"


def test_missing_extra_names_it() -> None:
    """Without psycopg, a URL is an ImportError naming the postgres extra."""
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from intentusnet.store import open_store\n"
        "try:\n"
        "    open_store('postgresql://u:secret@h/db')\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout == (
        "a PostgreSQL store (postgresql://u@h/db) needs the postgres extra: "
        "pip install 'intentusnet[postgres]'\n"
    )
