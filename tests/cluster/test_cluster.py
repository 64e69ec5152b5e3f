"""The lake on Dagster's distributed pieces: a PostgreSQL instance and Celery workers on a Redis
broker, all real servers started on 127.0.0.1 for this module and stopped afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from dagster import DagsterEventType, EventRecordsFilter

from kohaku_assets.cluster.servers import Cluster, local_cluster, missing_servers
from kohaku_assets.instance import instance_for
from kohaku_assets.resources import KohakuSettings
from kohaku_assets.runner import embedder_for, run_index
from kohaku_rag.document.tree import NodeKind
from kohaku_rag.indexing.steps import INDEX_ROWS
from kohaku_rag.retrieval.retriever import open_vector_store
from kohaku_rag.stores.bm25 import BM25Index

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(
        bool(missing_servers()), reason=f"a local cluster needs: {'; '.join(missing_servers())} (.ci/run installs them)"
    ),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with local_cluster(workers=2, workdir=tmp_path_factory.mktemp("cluster")) as running:
        yield running


def _lake_contents(settings: KohakuSettings) -> dict[str, object]:
    """Everything searchable: per-document index rows, the vector store's nodes and vectors,
    the BM25 index's paragraphs."""
    lake = settings.lake
    out: dict[str, object] = {}
    with open_vector_store(lake, embedder_for(settings)) as store:
        docs = sorted(store.document_versions())
        out["versions"] = store.document_versions()
        out["counts"] = {str(k): store.count(k) for k in NodeKind}
        for doc_id in docs:
            table = pq.read_table(lake.table(INDEX_ROWS, doc_id)).to_pydict()
            out[f"rows/{doc_id}"] = {k: v for k, v in table.items() if k != "vector"}
            vectors = [v for v in table["vector"] if v is not None]
            out[f"vectors/{doc_id}"] = np.round(np.asarray(vectors, dtype=np.float32), 5).tolist()
            out[f"stored/{doc_id}"] = [np.round(store.vector(n), 5).tolist() for n in table["node_id"]]
    bm25 = BM25Index.load(lake.bm25_path)
    out["bm25"] = (bm25.node_ids.tolist(), bm25.doc_ids.tolist(), bm25.terms.tolist(), bm25.post_scores.tolist())
    return out


def test_celery_build_on_postgres_equals_in_process_build(tmp_path: Path, corpus: Path, cluster: Cluster) -> None:
    pg_settings = KohakuSettings(lake_root=str(tmp_path / "cluster_lake"), corpus_dir=str(corpus))
    report = run_index(pg_settings, progress=lambda _m: None)
    assert sorted(report.recomputed) == ["carbon", "gpu", "water"] and not report.failed

    # The runs are in PostgreSQL, and every document step ran in a Celery worker process.
    instance = instance_for(pg_settings.lake.root)
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    runs = instance.get_runs()
    by_job = sorted(r.job_name for r in runs)
    assert by_job == ["assemble_indexes", "index_document", "index_document", "index_document"]
    engine = instance.get_event_records(EventRecordsFilter(DagsterEventType.ENGINE_EVENT), limit=1000)
    in_worker = [r for r in engine if "in celery worker" in (r.event_log_entry.dagster_event.message or "")]
    steps = instance.get_event_records(EventRecordsFilter(DagsterEventType.STEP_SUCCESS), limit=1000)
    document_steps = [r for r in steps if r.event_log_entry.job_name == "index_document"]
    assert len(in_worker) == len(document_steps) == 3 * 6
    workers = {r.event_log_entry.dagster_event.engine_event_data.metadata["Celery worker"].value for r in in_worker}
    assert workers and {w.split("@")[0] for w in workers} <= {"kohaku0", "kohaku1"}

    # A second run on the cluster finds everything up to date.
    again = run_index(pg_settings, progress=lambda _m: None)
    assert again.recomputed == [] and sorted(again.skipped) == ["carbon", "gpu", "water"]

    # The same corpus built in-process on the default SQLite instance holds the same index.
    with pytest.MonkeyPatch.context() as mp:
        for name in cluster.env:
            mp.delenv(name)
        local = KohakuSettings(lake_root=str(tmp_path / "local_lake"), corpus_dir=str(corpus))
        assert sorted(run_index(local, progress=lambda _m: None).recomputed) == ["carbon", "gpu", "water"]
        assert type(instance_for(local.lake.root).run_storage).__name__ == "SqliteRunStorage"
        expected = _lake_contents(local)
    assert _lake_contents(pg_settings) == expected
