"""The lake's stored tables: Parquet written atomically, each recording its row count and
content checksum, and the checks that find one cut short, garbled or marked damaged.

Every write goes to a temporary file in the same folder and is renamed into place, so a
crash or a failed partition leaves the previous good file untouched.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kohaku_rag.lake.atomic import atomic_path
from kohaku_rag.lake.damage import damage_marker, recorded_damage

_log = logging.getLogger("kohaku")
_SAFE_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def check_key(key: str) -> str:
    """Partition keys become file names; refuse anything that could escape the folder."""
    if not _SAFE_KEY.match(key):
        raise ValueError(
            f"{key!r} is not a usable id: use letters, digits, '.', '_' or '-' (at most 200), "
            "starting with a letter or digit"
        )
    return key


def write_bytes_atomic(target: Path, data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


# What every stored table records of itself, so rows deleted or garbled behind a valid
# footer are found: its row count (checked on every read of the footer, free) and a
# checksum of its content (checked when the table is read whole, and by `kohaku doctor`).
ROWS_KEY = "kohaku.rows"
CONTENT_KEY = "kohaku.content_sha256"
# A table lacking either proves nothing of its rows (written by hand, or the keys stripped):
# it is untrusted, so its producer recomputes it.
_PROOF = {ROWS_KEY: "row count", CONTENT_KEY: "content checksum"}


def _plain_type(kind: pa.DataType) -> pa.DataType:
    """The type with what a Parquet round trip renames (a list's item field) made plain."""
    if pa.types.is_list(kind):
        return pa.list_(_plain_type(kind.value_type))
    if pa.types.is_fixed_size_list(kind):
        return pa.list_(_plain_type(kind.value_type), kind.list_size)
    if pa.types.is_large_list(kind):
        return pa.large_list(_plain_type(kind.value_type))
    if pa.types.is_struct(kind):
        return pa.struct([pa.field(f.name, _plain_type(f.type)) for f in kind])
    return kind


def table_digest(table: pa.Table) -> str:
    """A checksum of a table's content (metadata left out): the Arrow IPC stream of its
    columns in one chunk, with plain types, which a Parquet round trip reproduces."""
    schema = pa.schema([pa.field(f.name, _plain_type(f.type)) for f in table.schema])
    plain = table.replace_schema_metadata(None).cast(schema).combine_chunks()
    if any(pa.types.is_struct(f.type) for f in schema):
        # Under a null struct slot (a tree node that is not a table) the child arrays hold
        # whatever the writer left there, which Parquet does not keep: digest the content
        # as a Parquet round trip gives it back, so writing and reading agree.
        buf = pa.BufferOutputStream()
        pq.write_table(plain, buf)
        plain = pq.read_table(pa.BufferReader(buf.getvalue())).replace_schema_metadata(None).cast(schema)
        plain = plain.combine_chunks()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, plain.schema) as writer:
        writer.write_table(plain)
    return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()


def write_parquet_atomic(table: pa.Table, target: Path, metadata: dict[str, str] | None = None) -> None:
    merged = dict(table.schema.metadata or {})
    merged.update({k.encode(): v.encode() for k, v in (metadata or {}).items()})
    merged[ROWS_KEY.encode()] = str(table.num_rows).encode()
    merged[CONTENT_KEY.encode()] = table_digest(table).encode()
    table = table.replace_schema_metadata(merged)
    with atomic_path(target) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    damage_marker(target).unlink(missing_ok=True)  # a new table: what was found of the old one is moot


def parquet_metadata(path: Path) -> dict[str, str]:
    """Key/value metadata stored in a Parquet file's schema ({} if the file is absent or
    unreadable: a stored table that can't be read is missing, so it is recomputed;
    `unreadable_reason` says why, for the message)."""
    if not path.exists():
        return {}
    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowException):
        return {}
    found = {k.decode(): v.decode() for k, v in meta.items() if not k.startswith(b"ARROW:")}
    return found if unreadable_reason(path) is None else {}


def unreadable_reason(path: Path) -> str | None:
    """Why a stored Parquet file can't be read (None: absent or readable). Reads its footer
    only: a file cut short or overwritten loses its footer first; rows deleted behind a
    valid footer change its row count; a table without its row count or checksum proves
    neither; what `kohaku doctor` found in its content is recorded beside it
    (`content_problem`)."""
    try:
        footer = pq.read_metadata(path)
    except FileNotFoundError:
        return None
    except (OSError, pa.ArrowException) as exc:
        return " ".join(str(exc).split()) or type(exc).__name__
    meta = footer.metadata or {}
    missing = [what for key, what in _PROOF.items() if key.encode() not in meta]
    if missing:
        return f"records no {' and no '.join(missing)}, so it can't be trusted"
    rows = meta[ROWS_KEY.encode()].decode()
    if rows != str(footer.num_rows):
        return f"holds {footer.num_rows} rows, {rows} when it was written"
    return recorded_damage(path)


def content_problem(path: Path, table: pa.Table | None = None) -> str | None:
    """What is wrong with a stored table's content (None: it matches the checksum it was
    written with). Reads it whole (or takes the `table` already read)."""
    try:
        table = table if table is not None else pq.read_table(path)
    except FileNotFoundError:
        return None
    except (OSError, pa.ArrowException) as exc:
        return " ".join(str(exc).split()) or type(exc).__name__
    want = (table.schema.metadata or {}).get(CONTENT_KEY.encode())
    if want is None:
        return "records no content checksum, so it can't be trusted"
    if table_digest(table) != want.decode():
        return "its content differs from the checksum it was written with"
    return None


def is_stored(path: Path) -> bool:
    """Whether a stored Parquet table exists and can be read. One that can't (cut short,
    overwritten) is missing, not fatal: it is renamed aside to `<name>.unreadable` (kept for
    a post-mortem, no longer listed or read), a warning names it, and its producer
    recomputes it."""
    if not path.exists():
        return False
    why = unreadable_reason(path)
    if why is None:
        return True
    aside = path.with_name(path.name + ".unreadable")
    os.replace(path, aside)
    damage_marker(path).unlink(missing_ok=True)
    _log.warning("%s can't be read (%s): moved aside to %s; it is recomputed", path, why, aside.name)
    return False
