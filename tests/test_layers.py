"""The house keeps its floors (issue 45): no import between the library's rooms runs back up
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
