"""The lake on disk: every file the pipeline keeps, and how it is kept safe.

- `layout`: where each table, blob, cache and index file lives (`Lake`).
- `tables`: Parquet tables written atomically, with their row count and checksum.
- `manifest`: the index's commit point, naming the files of the published generation.
- `damage`: what a deep check found, recorded beside the file.
- `atomic`, `sqlite_wal`, `disk_full`, `csv_cells`: writes that survive a crash, SQLite in
  WAL mode, a full disk said in one line, spreadsheet cells that are never formulas.
- `lock`: one writer per lake.
"""
