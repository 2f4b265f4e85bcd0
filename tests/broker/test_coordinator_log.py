"""The coordinators' shared state log file (``mirror/broker/coordinator_log.py``): state files
written before the two coordinators shared it still load, and the framing's rules (torn or
corrupt tail cut off, atomic rewrite, compaction failures only logged) hold for both.
"""

from __future__ import annotations

import shutil
import struct
import zlib
from pathlib import Path

from broker_helpers import T0
from mirror.broker.groups.state_log import (
    GroupDeletedRecord,
    GroupRecord,
    GroupStateLog,
    MemberRecord,
    OffsetRecord,
    TxnEndRecord,
)
from mirror.broker.coordinator_log import CoordinatorLog
from mirror.broker.transactions import TransactionStateLog, TxnMetadata, TxnState

GOLDEN = Path(__file__).parents[1] / "golden" / "broker"


def _installed(golden: str, directory: Path) -> Path:
    directory.mkdir(parents=True)
    return Path(shutil.copyfile(GOLDEN / golden, directory / "state.log"))


def test_an_existing_transaction_state_file_loads(tmp_path):
    path = _installed("transactions-state.log", tmp_path / ".transactions")
    size = path.stat().st_size
    state_log = TransactionStateLog(tmp_path / ".transactions")
    live = state_log.load()
    assert live == {
        "app": TxnMetadata("app", 1000, 0, 60_000, TxnState.PREPARE_COMMIT, T0 + 2,
                           partitions=frozenset({("t", 0), ("t", 1)}), txn_start_ms=T0 + 1),
        "old": TxnMetadata("old", 1001, 3, 10_000, TxnState.COMPLETE_ABORT, T0 + 3,
                           previous_producer_id=999, last_producer_epoch=2),
    }
    assert path.stat().st_size == size  # nothing cut off: every record passed its CRC
    done = live["app"].complete(T0 + 4)
    state_log.append(done)
    state_log.close()
    assert TransactionStateLog(tmp_path / ".transactions").load()["app"] == done


def test_an_existing_group_state_file_loads(tmp_path):
    path = _installed("groups-state.log", tmp_path / ".groups")
    size = path.stat().st_size
    state_log = GroupStateLog(tmp_path / ".groups")
    assert state_log.load() == [
        OffsetRecord("g", "t", 0, 5, 2, "meta", T0),
        OffsetRecord("g", "t", 1, 7, -1, "", T0 + 1, 1000),
        TxnEndRecord(1000, True),
        GroupRecord("g", 3, "consumer", "range", "m-1",
                    (MemberRecord("m-1", None, "c", "/127.0.0.1", 45_000, 300_000, b"\x00\x01sub", b"\x00\x02asg"),)),
        OffsetRecord("gone", "t", 0, 1, -1, "", T0 + 2),
        GroupDeletedRecord("gone"),
    ]
    assert path.stat().st_size == size
    state_log.close()


def test_both_state_logs_write_the_same_framing(tmp_path):
    """Each file is records of ``length int32 | crc32 uint32 | payload`` and nothing else."""
    transactions = TransactionStateLog(tmp_path / "t")
    transactions.load()
    transactions.append(TxnMetadata("a", 7, 0, 60_000, TxnState.EMPTY, T0))
    transactions.close()
    groups = GroupStateLog(tmp_path / "g")
    groups.load()
    groups.append([OffsetRecord("g", "t", 0, 5, -1, "", T0), TxnEndRecord(7, False)])
    groups.close()
    assert len(_payloads(tmp_path / "t" / "state.log")) == 1
    assert len(_payloads(tmp_path / "g" / "state.log")) == 2


def _payloads(path: Path) -> list[bytes]:
    data, position, payloads = path.read_bytes(), 0, []
    while position < len(data):
        length, crc = struct.unpack_from(">iI", data, position)
        payload = data[position + 8:position + 8 + length]
        assert len(payload) == length and zlib.crc32(payload) == crc
        payloads.append(payload)
        position += 8 + length
    return payloads


def test_a_record_failing_its_crc_ends_the_file(tmp_path):
    path = tmp_path / "state.log"
    records = CoordinatorLog(path)
    records.load()
    records.append([b"one", b"two", b"three"])
    records.close()
    data = bytearray(path.read_bytes())
    data[8 + 3 + 8] ^= 0xFF  # the first byte of "two"
    path.write_bytes(data)
    again = CoordinatorLog(path)
    assert again.load() == [b"one"]
    assert path.stat().st_size == 8 + 3 and again.records == 1
    again.append([b"four"])
    again.close()
    assert CoordinatorLog(path).load() == [b"one", b"four"]


def test_a_negative_length_ends_the_file(tmp_path):
    path = tmp_path / "state.log"
    path.write_bytes(struct.pack(">iI", 3, zlib.crc32(b"one")) + b"one" + struct.pack(">iI", -1, 0))
    assert CoordinatorLog(path).load() == [b"one"]
    assert path.stat().st_size == 8 + 3


def test_rewrite_replaces_the_file_and_appends_go_to_the_new_one(tmp_path):
    path = tmp_path / "state.log"
    records = CoordinatorLog(path, flush="always")
    records.load()
    records.append([b"a", b"b", b"c"])
    records.rewrite([b"c"])
    assert records.records == 1 and not path.with_suffix(".tmp").exists()
    records.append([b"d"])
    records.close()
    assert CoordinatorLog(path).load() == [b"c", b"d"]


def test_a_failed_compaction_keeps_every_appended_record(tmp_path, monkeypatch, caplog):
    path = tmp_path / "state.log"
    records = CoordinatorLog(path)
    records.load()
    records.append([b"a", b"b"])
    monkeypatch.setattr("mirror.broker.coordinator_log.os.replace",
                        lambda *args: (_ for _ in ()).throw(OSError("disk gone")))
    records.compact([b"b"])
    assert "compaction failed" in caplog.text
    records.append([b"c"])
    records.close()
    assert CoordinatorLog(path).load() == [b"a", b"b", b"c"]
