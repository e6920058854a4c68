"""``intentusnet log verify``: five tamper classes, a signed store, no catalog.

One signed file store of 1,000 records is made per module, its catalog
deleted; each test tampers with a copy, as someone who can write the store
(but not read the private key, except where said) would, and checks that
``log verify`` names what was done, with its exit code.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import orjson
import pytest
from click.testing import Result
from recordkit import change_answer, edit, finished, reseal

from intentusnet.record.keys import SigningKey
from intentusnet.record.signing import signature_data
from intentusnet.store import FileExecutionStore
from intentusnet.store.file.translog import log_folder

from .support import Invoke, WitnessProcess, record_file

RECORDS = 1000


class Base:
    """The module's store: its folder, key, key files and record ids."""

    def __init__(
        self, root: Path, key: SigningKey, files: tuple[Path, Path], ids: list[str]
    ) -> None:
        self.root, self.key, self.ids = root, key, ids
        self.private, self.public = files


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    """A signed store of 1,000 records, each a leaf of its log; no catalog."""
    folder = tmp_path_factory.mktemp("base")
    key = SigningKey.generate()
    files = key.save(folder / "keys")
    root = folder / "store"
    store = FileExecutionStore(root, signing_key=key)
    ids = [finished(store, f"hello {i}") for i in range(RECORDS)]
    store.close()
    for name in ("catalog.sqlite3", "catalog.sqlite3-wal", "catalog.sqlite3-shm"):
        (root / name).unlink(missing_ok=True)
    return Base(root, key, files, ids)


@pytest.fixture
def copy(base: Base, tmp_path: Path) -> Path:
    """A copy of the module's store to tamper with."""
    return copy_of(base.root, tmp_path / "store")


def copy_of(root: Path, to: Path) -> Path:
    """``root`` copied to ``to`` (replacing what is there)."""
    shutil.rmtree(to, ignore_errors=True)
    shutil.copytree(root, to)
    return to


def add_records(root: Path, key: SigningKey, count: int, text: str) -> list[str]:
    """``count`` more records closed by the key's holder, each a leaf."""
    store = FileExecutionStore(root, signing_key=key)
    ids = [finished(store, f"{text} {i}") for i in range(count)]
    store.close()
    return ids


def audit(
    invoke: Invoke, base: Base, root: Path, state: Path, *more: str
) -> tuple[int, dict[str, object]]:
    """``log verify --json`` on ``root`` remembering in ``state``: code, report."""
    result = invoke(
        "--store",
        str(root),
        "log",
        "verify",
        "--key",
        str(base.public),
        "--state",
        str(state),
        "--grace",
        "0",
        "--json",
        *more,
    )
    return result.exit_code, orjson.loads(result.stdout)


def named(report: dict[str, object]) -> list[tuple[object, object]]:
    """The report's findings as (name, execution id)."""
    findings = report["findings"]
    assert isinstance(findings, list)
    return [(f["name"], f["executionId"]) for f in findings]


def test_an_untouched_store_verifies_and_its_checkpoint_is_remembered(
    invoke: Invoke, base: Base, copy: Path, tmp_path: Path
) -> None:
    """No finding, exit 0, 1,000 leaves and records; the state holds the note."""
    state = tmp_path / "state"
    code, report = audit(invoke, base, copy, state)
    assert (code, report["findings"]) == (0, [])
    assert (report["size"], report["leaves"], report["records"]) == (1000,) * 3
    assert (
        state.read_bytes()
        == (log_folder(copy, base.key.key_id) / "checkpoint").read_bytes()
    )


def test_1_a_byte_edited_is_damaged(
    invoke: Invoke, base: Base, copy: Path, tmp_path: Path
) -> None:
    """One byte of a record changed: finding damaged, exit 11."""
    victim = base.ids[500]
    path = record_file(copy, victim)
    edit(path, path.stat().st_size // 2)
    code, report = audit(invoke, base, copy, tmp_path / "state")
    assert (code, named(report)) == (11, [("damaged", victim)])


def test_2_a_record_edited_rehashed_and_resigned_is_edited(
    invoke: Invoke, base: Base, copy: Path, tmp_path: Path
) -> None:
    """A record re-written with the key (its signature holds): edited, exit 12.

    ``verify ID --key`` accepts it (signed-valid): only the log tells.
    """
    victim = base.ids[321]
    path = record_file(copy, victim)
    forged = resign(
        reseal(path.read_bytes(), change_answer("forged")), base.key, victim
    )
    path.write_bytes(forged)
    plain = invoke("--store", str(copy), "verify", victim, "--key", str(base.public))
    assert plain.exit_code == 0, plain.output
    code, report = audit(invoke, base, copy, tmp_path / "state")
    assert (code, named(report)) == (12, [("edited", victim)])


def test_3_a_record_deleted_is_deleted(
    invoke: Invoke, base: Base, copy: Path, tmp_path: Path
) -> None:
    """A record's file removed: deleted, exit 13."""
    victim = base.ids[7]
    record_file(copy, victim).unlink()
    code, report = audit(invoke, base, copy, tmp_path / "state")
    assert (code, named(report)) == (13, [("deleted", victim)])


def test_4_a_store_restored_from_an_earlier_copy_is_a_rollback(
    invoke: Invoke, base: Base, copy: Path, tmp_path: Path
) -> None:
    """Verified at 1,050 leaves, then restored to the copy of 1,000: rollback, exit 15.

    Restored and then grown past 1,050 with other records, it is a split view.
    """
    state = tmp_path / "state"
    earlier = copy_of(copy, tmp_path / "earlier")
    assert audit(invoke, base, copy, state)[0] == 0
    add_records(copy, base.key, 50, "later")
    code, report = audit(invoke, base, copy, state)
    assert (code, report["size"]) == (0, 1050)
    copy_of(earlier, copy)
    code, report = audit(invoke, base, copy, state)
    assert (code, named(report)) == (15, [("rollback", None)])
    add_records(copy, base.key, 60, "other")  # the signer goes on from the copy
    code, report = audit(invoke, base, copy, state)
    assert (code, named(report)) == (16, [("split-view", None)])


def test_5_two_readers_shown_two_histories_is_a_split_view(
    invoke: Invoke, base: Base, copy: Path, tmp_path: Path
) -> None:
    """Two copies grown apart verify alone; each other's checkpoint: split view.

    Two copies grown apart each verify alone; either reader's checkpoint given to the
    other (--trusted) is a split view, exit 16.
    """
    other = copy_of(copy, tmp_path / "other")
    add_records(copy, base.key, 20, "one")
    add_records(other, base.key, 20, "two")
    first, second = tmp_path / "first.state", tmp_path / "second.state"
    assert audit(invoke, base, copy, first)[0] == 0
    assert audit(invoke, base, other, second)[0] == 0
    code, report = audit(invoke, base, copy, first, "--trusted", str(second))
    assert (code, named(report)) == (16, [("split-view", None)])
    code, report = audit(invoke, base, other, first)  # the first reader's state
    assert (code, named(report)) == (16, [("split-view", None)])


def test_a_closed_record_without_a_leaf_is_hidden_until_backfilled(
    invoke: Invoke, base: Base, copy: Path, tmp_path: Path
) -> None:
    """A record closed with the log off: hidden (exit 10); log backfill mends it."""
    store = FileExecutionStore(copy, signing_key=base.key, log_cadence=None)
    hidden = finished(store)
    store.close()
    code, report = audit(invoke, base, copy, tmp_path / "state")
    assert (code, named(report)) == (10, [("hidden", hidden)])
    recent = invoke(
        "--store",
        str(copy),
        "log",
        "verify",
        "--key",
        str(base.public),
        "--state",
        str(tmp_path / "state"),
    )  # within the default grace of 60 s it may still be waiting
    assert recent.exit_code == 0, recent.output
    backfill = ("--store", str(copy), "--signing-key", str(base.private))
    filled = invoke(*backfill, "log", "backfill", "--json")
    assert filled.exit_code == 0, filled.output
    assert orjson.loads(filled.stdout)["appended"] == 1
    again = invoke(*backfill, "log", "backfill", "--json")
    assert orjson.loads(again.stdout)["appended"] == 0
    assert audit(invoke, base, copy, tmp_path / "state")[0] == 0


def test_several_findings_exit_with_the_highest(
    invoke: Invoke, base: Base, copy: Path, tmp_path: Path
) -> None:
    """A byte edited (11) and a record deleted (13): both named, exit 13."""
    path = record_file(copy, base.ids[1])
    edit(path, path.stat().st_size // 2)
    record_file(copy, base.ids[2]).unlink()
    code, report = audit(invoke, base, copy, tmp_path / "state")
    assert code == 13
    assert sorted(named(report)) == sorted(
        [("damaged", base.ids[1]), ("deleted", base.ids[2])]
    )


def test_a_changed_tile_is_log_damaged_and_not_remembered(
    invoke: Invoke, base: Base, copy: Path, tmp_path: Path
) -> None:
    """A byte of a level-0 tile changed: log-damaged, exit 14; no state written."""
    tile = log_folder(copy, base.key.key_id) / "tile" / "0" / "000"
    edit(tile, 40)
    state = tmp_path / "state"
    code, report = audit(invoke, base, copy, state)
    assert (code, named(report)) == (14, [("log-damaged", None)])
    assert not state.exists()


def test_a_state_signed_by_another_key_is_refused(
    invoke: Invoke, base: Base, copy: Path, tmp_path: Path
) -> None:
    """A remembered checkpoint the log's key did not sign: exit 6, named."""
    state = tmp_path / "state"
    note = (log_folder(copy, base.key.key_id) / "checkpoint").read_bytes()
    state.write_bytes(note.replace(b"\n1000\n", b"\n999\n"))
    result = invoke(
        "--store",
        str(copy),
        "log",
        "verify",
        "--key",
        str(base.public),
        "--state",
        str(state),
    )
    assert result.exit_code == 6
    assert str(state) in result.output


def resign(data: bytes, key: SigningKey, execution_id: str) -> bytes:
    """A re-sealed record's ``SIGNATURE`` line signed again by ``key``."""
    lines = data.split(b"\n")[:-1]

    def change(number: int, fields: dict[str, object]) -> None:
        if fields.get("type") == "SIGNATURE":
            head = orjson.loads(lines[number - 2])["hash"]
            fields["data"] = signature_data(key, execution_id, number - 2, head)

    return reseal(data, change)


def test_verify_all_walks_the_log_when_given_its_key(
    invoke: Invoke, base: Base, copy: Path
) -> None:
    """verify --all --key names a deleted record (exit 13); without a key, a note."""
    victim = base.ids[3]
    record_file(copy, victim).unlink()
    found = invoke("--store", str(copy), "verify", "--all", "--key", str(base.public))
    assert found.exit_code == 13
    assert f"deleted: {victim}: the log holds it; the store does not" in found.stdout
    keyless = invoke("--store", str(copy), "verify", "--all")
    assert keyless.exit_code == 0
    assert "give its key (--key) to check it too" in keyless.stderr


def lines_of(path: Path) -> list[bytes]:
    """A record file's lines, newlines kept."""
    return path.read_bytes().splitlines(keepends=True)


def cut_signature(path: Path) -> None:
    """The last line (the SIGNATURE) cut off."""
    path.write_bytes(b"".join(lines_of(path)[:-1]))


def add_after_signature(path: Path) -> None:
    """A line chained after the SIGNATURE, as a careful forger would seal it."""
    last = orjson.loads(lines_of(path)[-1])
    fields = {
        "seq": last["seq"] + 1,
        "type": "AGENT_ATTEMPT_END",
        "atMs": last["atMs"],
        "data": {"agent": "echo", "attempt": 2, "outcome": "success"},
        "prevHash": last["hash"],
    }
    body = orjson.dumps(fields)[:-1]
    digest = hashlib.sha256(body).hexdigest()
    with path.open("ab") as file:
        file.write(body + b',"hash":"sha256:' + digest.encode() + b'"}\n')


def unsign(path: Path) -> None:
    """The key id and the signature removed, every hash recomputed."""

    def drop_key(number: int, fields: dict[str, object]) -> None:
        if number == 1:
            del fields["keyId"]

    path.write_bytes(reseal(b"".join(lines_of(path)[:-1]), drop_key))


@pytest.mark.parametrize(
    ("tamper", "finding"),
    [
        (cut_signature, ("damaged", 11)),
        (add_after_signature, ("damaged", 11)),
        (unsign, ("edited", 12)),
    ],
    ids=["signature cut", "line added after the signature", "key id removed"],
)
def test_the_rest_of_the_tamper_table_is_found(
    invoke: Invoke, base: Base, copy: Path, tmp_path: Path, tamper, finding
) -> None:
    """records.md's rows: each tamper names its record with its finding and code."""
    victim = base.ids[99]
    tamper(record_file(copy, victim))
    code, report = audit(invoke, base, copy, tmp_path / "state")
    assert (code, named(report)) == (finding[1], [(finding[0], victim)])


def test_a_record_cut_back_to_its_signed_state_before_invalidation_is_edited(
    invoke: Invoke, base: Base, copy: Path, tmp_path: Path
) -> None:
    """INVALIDATED and its SIGNATURE removed (signed state): edited, exit 12."""
    victim = base.ids[42]
    store = FileExecutionStore(copy, signing_key=base.key)
    store.invalidate(victim, "the answer was wrong")
    store.close()
    assert audit(invoke, base, copy, tmp_path / "state")[0] == 0
    path = record_file(copy, victim)
    path.write_bytes(b"".join(lines_of(path)[:-2]))
    for catalog in copy.glob("catalog.sqlite3*"):
        catalog.unlink()  # which remembered the longer record
    plain = invoke("--store", str(copy), "verify", victim, "--key", str(base.public))
    assert plain.exit_code == 0, plain.output  # that state was signed
    code, report = audit(invoke, base, copy, tmp_path / "state")
    assert (code, named(report)) == (12, [("edited", victim)])


def test_a_log_gone_after_a_checkpoint_was_remembered_is_a_rollback(
    invoke: Invoke, base: Base, copy: Path, tmp_path: Path
) -> None:
    """The whole log/ folder removed: rollback (15); with nothing remembered: exit 3."""
    state = tmp_path / "state"
    assert audit(invoke, base, copy, state)[0] == 0
    shutil.rmtree(log_folder(copy, base.key.key_id))
    code, report = audit(invoke, base, copy, state)
    assert (code, named(report)) == (15, [("rollback", None)])
    fresh = invoke(
        "--store",
        str(copy),
        "log",
        "verify",
        "--key",
        str(base.public),
        "--state",
        str(tmp_path / "none"),
    )
    assert fresh.exit_code == 3
    assert "has no transparency log" in fresh.stderr


def test_the_default_state_file_is_under_xdg_state_home(
    invoke: Invoke, base: Base, copy: Path, tmp_path: Path
) -> None:
    """Without --state the checkpoint goes to $XDG_STATE_HOME/intentusnet/log/."""
    home = tmp_path / "xdg"
    result = invoke(
        "--store",
        str(copy),
        "log",
        "verify",
        "--key",
        str(base.public),
        XDG_STATE_HOME=str(home),
    )
    assert result.exit_code == 0, result.output
    name = f"intentusnet_{base.key.key_id.replace(':', '_')}.checkpoint"
    assert (home / "intentusnet" / "log" / name).read_bytes() == (
        log_folder(copy, base.key.key_id) / "checkpoint"
    ).read_bytes()


def test_backfill_without_the_signing_key_is_a_usage_error(
    invoke: Invoke, copy: Path
) -> None:
    """log backfill with no key to sign the checkpoint: exit 2, named, no traceback."""
    result = invoke("--store", str(copy), "log", "backfill")
    assert result.exit_code == 2
    assert "--signing-key" in result.stderr
    assert "Traceback" not in result.output


@pytest.fixture
def witness_keys(tmp_path: Path) -> tuple[Path, Path]:
    """Two witnesses' signing key files."""
    return (
        SigningKey.generate().save(tmp_path / "w1")[0],
        SigningKey.generate().save(tmp_path / "w2")[0],
    )


def start_witness(base: Base, tmp_path: Path, key: Path, name: str) -> WitnessProcess:
    """A witness of the module's log, its state in tmp_path/NAME."""
    return WitnessProcess(
        tmp_path,
        "--log",
        f"intentusnet/{base.key.key_id}={base.public}",
        "--key",
        str(key),
        "--state",
        str(tmp_path / name),
    )


def publish(invoke: Invoke, base: Base, root: Path, *more: str) -> Result:
    """``log publish --json`` on ``root`` with the options ``more``."""
    return invoke(
        "--store", str(root), "log", "publish", "--key", str(base.public), *more
    )


def cosigned(root: Path, base: Base) -> Path:
    """The store's published, cosigned checkpoint file."""
    return log_folder(root, base.key.key_id) / "checkpoint.cosigned"


def test_5_with_a_witness_the_fork_is_not_cosigned_and_is_a_split_view(
    invoke: Invoke,
    base: Base,
    copy: Path,
    tmp_path: Path,
    witness_keys: tuple[Path, Path],
) -> None:
    """A witness refuses the fork (exit 17); the fork's reader sees a split view.

    The witness cosigns one history and refuses the other (exit 17, nothing published);
    the cosigned checkpoint given to the other reader: split view.
    """
    witness = start_witness(base, tmp_path, witness_keys[0], "w1")
    try:
        entry = f"{witness.url}={witness.vkey}"
        assert publish(invoke, base, copy, "--witness", entry).exit_code == 0
        other = copy_of(copy, tmp_path / "other")
        add_records(copy, base.key, 20, "one")
        add_records(other, base.key, 20, "two")
        cosigned(copy, base).unlink()  # from size 0: the witness answers 409
        result = publish(invoke, base, copy, "--witness", entry)
        assert result.exit_code == 0, result.output
        assert "at size 1020, cosigned by 1 of 1" in result.output
        before = cosigned(other, base).read_bytes()
        result = publish(invoke, base, other, "--witness", entry)
        assert result.exit_code == 17
        assert "refused the checkpoint (422)" in result.output
        assert cosigned(other, base).read_bytes() == before
        code, report = audit(
            invoke, base, copy, tmp_path / "a.state", "--witness", witness.vkey
        )
        assert (code, report["findings"]) == (0, [])
        code, report = audit(
            invoke,
            base,
            other,
            tmp_path / "b.state",
            "--witness",
            witness.vkey,
            "--trusted",
            str(cosigned(copy, base)),
        )
        assert (code, named(report)) == (16, [("split-view", None)])
    finally:
        witness.stop()


def test_two_readers_with_cosigned_checkpoints_of_two_histories_see_a_split_view(
    invoke: Invoke,
    base: Base,
    copy: Path,
    tmp_path: Path,
    witness_keys: tuple[Path, Path],
) -> None:
    """Cosigned checkpoints of two histories show a split view (exit 16).

    Each history cosigned by one of two witnesses (quorum 1) verifies alone; a quorum of
    2 finds each unwitnessed (17); exchanged, each is a split view (16).
    """
    first = start_witness(base, tmp_path, witness_keys[0], "w1")
    second = start_witness(base, tmp_path, witness_keys[1], "w2")
    try:
        other = copy_of(copy, tmp_path / "other")
        add_records(copy, base.key, 7, "one")  # same size: the roots differ
        add_records(other, base.key, 7, "two")
        entries = [f"{w.url}={w.vkey}" for w in (first, second)]
        assert publish(invoke, base, copy, "--witness", entries[0]).exit_code == 0
        assert publish(invoke, base, other, "--witness", entries[1]).exit_code == 0
        keys = ["--witness", first.vkey, "--witness", second.vkey]
        for root, name in ((copy, "a"), (other, "b")):
            state = tmp_path / f"{name}.state"
            code, _ = audit(invoke, base, root, state, *keys, "--witness-quorum", "1")
            assert code == 0
            code, report = audit(invoke, base, root, state, *keys)
            assert (code, named(report)) == (17, [("unwitnessed", None)])
        for root, theirs in ((copy, other), (other, copy)):
            code, report = audit(
                invoke,
                base,
                root,
                tmp_path / f"{root.name}.exchanged",
                *keys,
                "--witness-quorum",
                "1",
                "--trusted",
                str(cosigned(theirs, base)),
            )
            assert (code, named(report)) == (16, [("split-view", None)])
    finally:
        first.stop()
        second.stop()


def test_publish_and_verify_without_enough_cosignatures(
    invoke: Invoke,
    base: Base,
    copy: Path,
    tmp_path: Path,
    witness_keys: tuple[Path, Path],
) -> None:
    """Short of its quorum nothing is published (exit 17); bad options exit 2.

    A witness down: nothing published, exit 17; no cosigned checkpoint, or a cosignature
    altered: unwitnessed, exit 17; bad --witness options: exit 2.
    """
    witness = start_witness(base, tmp_path, witness_keys[0], "w1")
    try:
        vkey = witness.vkey
        down = "http://127.0.0.1:9=" + vkey  # discard: nothing listens
        result = publish(invoke, base, copy, "--witness", down)
        assert result.exit_code == 17
        assert "cannot reach it" in result.output
        assert not cosigned(copy, base).exists()
        state = tmp_path / "state"
        code, report = audit(invoke, base, copy, state, "--witness", vkey)
        assert (code, named(report)) == (17, [("unwitnessed", None)])
        result = publish(invoke, base, copy, "--witness", f"{witness.url}={vkey}")
        assert result.exit_code == 0
        assert audit(invoke, base, copy, state, "--witness", vkey)[0] == 0
        path = cosigned(copy, base)
        note = path.read_bytes()
        cut = note.rindex(b" ") + 20  # a byte inside the cosignature's signature
        flipped = b"A" if note[cut : cut + 1] != b"A" else b"B"
        path.write_bytes(note[:cut] + flipped + note[cut + 1 :])
        code, report = audit(invoke, base, copy, state, "--witness", vkey)
        assert (code, named(report)) == (17, [("unwitnessed", None)])
        assert "does not match" in str(report["findings"])
        for bad in (
            ["--witness", "no-key"],
            ["--witness", vkey, "--witness-quorum", "2"],
        ):
            assert publish(invoke, base, copy, *bad).exit_code == 2
        assert publish(invoke, base, copy, "--witness", vkey).exit_code == 2  # no URL
    finally:
        witness.stop()


def test_4_with_a_witness_a_store_restored_from_an_earlier_copy_is_not_cosigned(
    invoke: Invoke,
    base: Base,
    copy: Path,
    tmp_path: Path,
    witness_keys: tuple[Path, Path],
) -> None:
    """A store restored from an earlier copy: refused by the witness, a rollback.

    The witness cosigned 1,030 leaves; the store restored to 1,000 is refused (it holds
    a larger tree: exit 17), and a reader requiring it sees a rollback.
    """
    earlier = copy_of(copy, tmp_path / "earlier")
    witness = start_witness(base, tmp_path, witness_keys[0], "w1")
    try:
        entry = f"{witness.url}={witness.vkey}"
        add_records(copy, base.key, 30, "later")
        assert publish(invoke, base, copy, "--witness", entry).exit_code == 0
        saved = cosigned(copy, base).read_bytes()
        copy_of(earlier, copy)
        result = publish(invoke, base, copy, "--witness", entry)
        assert result.exit_code == 17
        assert "it holds a larger tree (1030 leaves)" in result.output
        assert not cosigned(copy, base).exists()
        state = tmp_path / "state"
        code, report = audit(invoke, base, copy, state, "--witness", witness.vkey)
        assert (code, named(report)) == (17, [("unwitnessed", None)])
        cosigned(copy, base).write_bytes(saved)  # a reader holding the cosigned one
        code, report = audit(invoke, base, copy, state, "--witness", witness.vkey)
        assert (code, named(report)) == (15, [("rollback", None)])
    finally:
        witness.stop()
