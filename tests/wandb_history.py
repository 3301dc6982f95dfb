"""Read an offline wandb run's history from its `.wandb` file (wandb no longer ships a Python reader).

The file is a LevelDB-style log: a 7-byte header (":W&B", magic, version), then 32 KiB blocks of
records (crc32, length, type: full/first/middle/last), each a `wandb_internal_pb2.Record`."""
from __future__ import annotations

import json
import struct
import time
from pathlib import Path

BLOCK = 32768
HEADER = 7


def records(path: str | Path) -> list:
    """Every Record of a .wandb file, in order."""
    from wandb.proto import wandb_internal_pb2

    data = Path(path).read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path}: not a .wandb file")
    out, pos, pending = [], HEADER, b""
    while pos + 7 <= len(data):
        if BLOCK - pos % BLOCK < 7:  # too little room left in the block for a header: padding
            pos += BLOCK - pos % BLOCK
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        payload, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind == 0 and length == 0:
            continue
        pending += payload
        if kind in (1, 4):  # full, last
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            out.append(record)
            pending = b""
    return out


def history(path: str | Path) -> list[dict]:
    """The logged history rows: {key: value} with `_step`, decoded from their JSON values."""
    rows = []
    for record in records(path):
        if record.WhichOneof("record_type") == "history":
            row = {}
            for item in record.history.item:
                key = item.key or "/".join(item.nested_key)
                row[key] = json.loads(item.value_json)
            rows.append(row)
    return rows


def written_history(path: str | Path, rows: int, wait_s: float = 30.0) -> list[dict]:
    """`history(path)` once it holds at least `rows` rows, read again every 0.1 s for at most `wait_s`: wandb's
    service process may still be writing the last block after `finish()` returns on a busy machine (a CI run
    read none of a one-row run's rows once). Whatever it holds then is returned, for the caller to check."""
    deadline = time.monotonic() + wait_s
    while True:
        found = history(path)
        if len(found) >= rows or time.monotonic() > deadline:
            return found
        time.sleep(0.1)
