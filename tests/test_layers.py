"""The house keeps its floors: no import between the library's rooms runs back up
(a circle between rooms), and answering reads the answer's own records from `answers/`, never
from `evaluation/`, which sits above it."""

from import_floors import module_edges, room_edges, upward


def test_no_room_import_runs_back_up() -> None:
    assert upward(room_edges(module_edges())) == []


def test_answering_imports_nothing_from_evaluation() -> None:
    edges = module_edges()
    crossing = sorted(
        (a, b)
        for a, b in edges
        if a.startswith(("kohaku_rag.answering.", "kohaku_rag.answers.")) and b.startswith("kohaku_rag.evaluation")
    )
    assert crossing == []


def test_the_lake_and_the_document_model_stand_under_every_stage() -> None:
    """`lake/` (files on disk) and `document/` (the tree, a table's record) are what every
    stage stands on, so they import nothing of the stages: only each other's kind and the
    error tree."""
    edges = module_edges()
    below = ("kohaku_rag.lake", "kohaku_rag.document")
    allowed = (*below, "kohaku_rag.errors")
    reaching_up = sorted((a, b) for a, b in edges if a.startswith(below) and not b.startswith(allowed))
    assert reaching_up == []
