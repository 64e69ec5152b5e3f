"""A sweep scored with the 2026 metric on a question file with the flag columns: the report's
table names the metric and its parts, and a plot shows the wrong-value rate per flag. Real
Dagster runs against the seeded fake model server (seed 1 answers 999 W to the watts question)."""

import json

from kohaku_assets.cli import main as cli_main
from kohaku_rag.experiments.sweep import sweeps_dir

SWEEP = """base = "base26"
seeds = 1
[grid]
"generation.temperature" = [0.2, 0.7]
"""


def test_a_2026_sweep_report_shows_the_metric_and_the_flags(env, capsys, tmp_path):
    settings, server, questions = env
    lines = questions.read_text().splitlines()
    flagged = questions.parent / "flagged.csv"
    # q1 (tCO2e) flagged Table, q2 (watts) flagged Figure and Math, q3 unflagged
    flagged.write_text(
        "\n".join([lines[0] + ",Table,Figure,Math", lines[1] + ",1,0,0", lines[2] + ",0,1,1", lines[3] + ",0,0,0"])
        + "\n"
    )
    folder = settings.lake.root / "configs"
    base = json.loads((folder / "base.json").read_text())
    (folder / "base26.json").write_text(
        json.dumps({**base, "questions": str(flagged), "scoring": {"metric": "wattbot2026"}})
    )
    server.wrong_seeds = {0}  # every member's only run answers the watts question wrong
    sweeps_dir(settings.lake).mkdir(parents=True)
    (sweeps_dir(settings.lake) / "grid.toml").write_text(SWEEP)
    assert cli_main(["sweep", "grid", "--json"]) == 0
    capsys.readouterr()

    out = tmp_path / "out" / "report.md"
    assert cli_main(["report", "grid", "--out", str(out)]) == 0
    text = out.read_text()
    # value 2/3, ref 1 (the wrong answer still cites gpu), no unanswerable question (na 1):
    # 0.75·2/3 + 0.20 + 0.05 = 0.75
    assert "| 0.750 | wattbot2026 | 0.667 / 1.000 / 1.000 | 1.000 / 1.000 |" in text
    assert "## wrong value rate per question flag" in text
    assert (out.parent / "flag_wrong_rate.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
