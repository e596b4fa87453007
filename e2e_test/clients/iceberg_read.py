#!/usr/bin/env python3
"""Reads an Iceberg table back with pyiceberg, independently of Eddy, for the Iceberg sink tests.

    iceberg_read.py sql <sqlite-catalog-file> <catalog-name> <warehouse> <namespace.table> [s3-endpoint]
    iceberg_read.py storage <table-location> [s3-endpoint]
    iceberg_read.py append <first-id> <count> sql <sqlite-catalog-file> <catalog-name> <warehouse> <namespace.table>

`append` is another writer: it appends rows (id, 'py' || id) through pyiceberg's own commit.

Prints one JSON object: {"rows": [...], "snapshots": [{"summary": {...}}, ...], "scan": [...]}.
`rows` are the table's live rows, computed from the current snapshot's files by the spec's
rules: a data row is deleted by an equality-delete row with equal key columns and a greater
data sequence number. `scan` is pyiceberg's own table scan (only for tables without delete
files, which pyiceberg cannot apply yet; `null` otherwise). Prints {"missing": true} when the
table does not exist yet.
"""

import json
import sys

import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.io import load_file_io
from pyiceberg.manifest import DataFileContent
from pyiceberg.table import StaticTable


def s3_properties(endpoint):
    if not endpoint:
        return {}
    return {
        "s3.endpoint": endpoint,
        "s3.access-key-id": "test",
        "s3.secret-access-key": "test",
        "s3.region": "us-east-1",
    }


def load(args):
    if args[0] == "sql":
        path, name, warehouse, ident = args[1:5]
        props = s3_properties(args[5] if len(args) > 5 else None)
        catalog = SqlCatalog(name, uri=f"sqlite:///{path}", warehouse=warehouse, **props)
        try:
            return catalog.load_table(ident)
        except NoSuchTableError:
            return None
    location = args[1].rstrip("/")
    props = s3_properties(args[2] if len(args) > 2 else None)
    io = load_file_io(props, location)
    hint = io.new_input(f"{location}/metadata/version-hint.text")
    if not hint.exists():
        return None
    with hint.open() as f:
        version = int(f.read().decode().strip())
    while io.new_input(f"{location}/metadata/v{version + 1}.metadata.json").exists():
        version += 1
    return StaticTable.from_metadata(f"{location}/metadata/v{version}.metadata.json", props)


def plain(v):
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return str(v)


def live_rows(table):
    snapshot = table.current_snapshot()
    if snapshot is None:
        return [], False
    data, deletes = [], []
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            f = entry.data_file
            with table.io.new_input(f.file_path).open() as stream:
                rows = pq.read_table(stream).to_pylist()
            if f.content == DataFileContent.DATA:
                data.append((entry.sequence_number, rows))
            elif f.content == DataFileContent.EQUALITY_DELETES:
                names = [table.schema().find_field(i).name for i in f.equality_ids]
                deletes.append((entry.sequence_number, names, rows))
            else:
                raise SystemExit(f"unexpected position delete file {f.file_path}")
    # For each set of key columns, each deleted key's newest delete sequence number.
    newest = {}
    for dseq, names, drows in deletes:
        keys = newest.setdefault(tuple(names), {})
        for d in drows:
            k = tuple(d[n] for n in names)
            keys[k] = max(keys.get(k, dseq), dseq)
    out = []
    for seq, rows in data:
        for row in rows:
            gone = any(keys.get(tuple(row[n] for n in names), -1) > seq for names, keys in newest.items())
            if not gone:
                out.append([plain(row[f.name]) for f in table.schema().fields])
    return sorted(out, key=json.dumps), bool(deletes)


def append(first, count, args):
    import pyarrow as pa

    table = load(args)
    schema = table.schema().as_arrow()
    ids = list(range(first, first + count))
    data = pa.table({"id": pa.array(ids, type=schema.field("id").type), "v": pa.array([f"py{i}" for i in ids], type=schema.field("v").type)}, schema=schema)
    table.append(data)
    print(json.dumps({"appended": count}))


def main():
    if sys.argv[1] == "append":
        append(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
        return
    table = load(sys.argv[1:])
    if table is None:
        print(json.dumps({"missing": True}))
        return
    rows, has_deletes = live_rows(table)
    scan = None
    if not has_deletes:
        scanned = table.scan().to_arrow().to_pylist()
        scan = sorted(([plain(r[f.name]) for f in table.schema().fields] for r in scanned), key=json.dumps)
    # In commit order (the metadata file lists them in no particular order).
    ordered = sorted(table.snapshots(), key=lambda s: s.sequence_number)
    snapshots = [{"summary": dict(s.summary.additional_properties), "operation": str(s.summary.operation), "sequence": s.sequence_number} for s in ordered]
    print(json.dumps({"rows": rows, "scan": scan, "snapshots": snapshots, "columns": [f.name for f in table.schema().fields]}))


if __name__ == "__main__":
    main()
