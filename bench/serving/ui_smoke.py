"""The Dagster UI as the front door: drive `kohaku ui` on a demo lake through Dagster's
GraphQL API and a headless Chromium, and time what a user does there.

    python bench/serving/ui_smoke.py                      # prints seconds per step and a screenshot folder
    python bench/serving/ui_smoke.py --work /tmp/ui-smoke --port 3111
    python bench/serving/ui_smoke.py --code /path/to/other/checkout --only materialize   # e.g. an older commit
    python bench/serving/ui_smoke.py --code /tmp/old-checkout --no-configs-sensor  # an older commit's timings

Steps, each timed from the click (the GraphQL mutation the UI sends) to the end:
  0. `kohaku demo --no-ask` builds a lake from the CLI; the UI must list those runs under
     the `index_document` job of the code location (GraphQL and the rendered page), and
     re-execute one of them.
  a. materialize one document partition: a run of `index_document` launched from the UI;
  b. a backfill of the `answer_config` job for one config partition (a config whose LLM is
     a fake OpenAI-compatible server started here, on 127.0.0.1);
  a2. click → searchable: a new document's partition added and materialized from the UI,
     timed until `kohaku search` returns it (the indexes re-assemble by automation);
  b. a backfill of the `answer_config` job for one config partition (a config whose LLM is
     a fake OpenAI-compatible server started here, on 127.0.0.1), then click → leaderboard:
     until `qa/leaderboard.parquet` lists the config (refreshed by automation);
  c. turn on `corpus_sensor`, drop a new Markdown document into the corpus, and wait until
     `kohaku search` (the CLI, same lake) returns it;
  d. the lineage: `retrievals` downstream of the three indexes, and after c's re-index the
     config's answering assets shown stale (their index changed) while no run started for them;
  e. turn on `configs_sensor` with configs that were there before (`default`, `smoke`):
     nothing is launched for them; a config added afterwards is run.
Screenshots of the Overview timeline, the runs, the job's runs and an asset page are written
under the printed folder; the rendered DOM of each is checked for what must be there.
Exits 1 if any run failed, a step timed out, a page lacks what it must show, or the new
document is not searchable. Every process started here is stopped (by its pid) at the end.
A benchmark, not part of `make test`: it needs `chromium` (Debian: apt-get install chromium).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.support.chat_server import ChatServer  # noqa: E402

NEW_DOC = """# Immersion cooling at the Zephyrine site

The Zephyrine data hall moved its training racks to single-phase immersion cooling in 2024.
Pump and dry-cooler power fell to 4 percent of the IT load, from 31 percent with chilled air.
"""
UI_DOC = """# Halvorsen wind farm supply

The Halvorsen campus buys the output of a 48 megawatt wind farm under a fifteen-year contract.
"""
QUESTIONS = [
    ("q1", "How much energy does training a large model use?", "MWh"),
    ("q2", "Which GPU had the lowest power draw?", "is_blank"),
]
FAILED = {"FAILURE", "CANCELED"}
DONE = {"SUCCESS", *FAILED}


class FakeLLM(ChatServer):
    """An OpenAI-compatible server answering like a terse model: the planner gets the
    question back as its one query, an answer cites the first allowed reference."""

    def _echo(self, body: dict[str, Any], messages: list[dict[str, str]], key: str) -> str:  # type: ignore[override]
        schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema", {})
        props = schema.get("properties", {})
        if "queries" in props:
            return json.dumps({"queries": [key.splitlines()[-1][:200]]})
        refs = props.get("ref_id", {}).get("items", {}).get("enum", [])
        return json.dumps(
            {
                "explanation": "from the context",
                "answer": "42",
                "answer_value": "42",
                "answer_unit": "MWh",
                "ref_id": refs[:1],
                "is_blank": False,
            }
        )


# ── processes ──────────────────────────────────────────────────────────────


def kohaku(code: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """The `kohaku` command of the checkout `code`, in a subprocess."""
    cmd = [sys.executable, "-c", "import sys; from kohaku_assets.cli import main; sys.exit(main())", *args]
    env = {**os.environ, "PYTHONPATH": str(code)}
    return subprocess.run(cmd, cwd=code, env=env, capture_output=True, text=True, timeout=timeout)


def start_ui(code: Path, lake: Path, corpus: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-c", "import sys; from kohaku_assets.cli import main; sys.exit(main())"]
    cmd += ["ui", "--lake", str(lake), "--corpus", str(corpus), "--port", str(port)]
    env = {**os.environ, "PYTHONPATH": str(code), "DAGSTER_HOME": str(lake / ".dagster")}
    env.pop("KOHAKU_CONFIGS", None)
    # Its own process group: `dagster dev` starts a webserver, a daemon and code servers.
    return subprocess.Popen(
        cmd, cwd=code, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the group of the process started here (dagster dev shuts its children
    down), then SIGKILL to what is left of that group."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    time.sleep(1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # stragglers of that group, if any


# ── GraphQL ────────────────────────────────────────────────────────────────


class UI:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.location = ""
        self.repository = ""

    def gql(self, query: str, **variables: Any) -> dict[str, Any]:
        data = json.dumps({"query": query, "variables": variables}).encode()
        req = urllib.request.Request(f"{self.base}/graphql", data, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            out = json.loads(resp.read())
        if out.get("errors"):
            raise RuntimeError(f"GraphQL errors: {out['errors']}")
        return out["data"]

    def wait_ready(self, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{self.base}/server_info", timeout=5).read()
                repos = self.gql(
                    "{ repositoriesOrError { __typename ... on RepositoryConnection"
                    " { nodes { name location { name } } } } }"
                )["repositoriesOrError"]
                if repos["__typename"] == "RepositoryConnection" and repos["nodes"]:
                    self.gql("mutation { setNuxSeen }")  # no welcome dialog over the screenshots
                    self.repository = repos["nodes"][0]["name"]
                    self.location = repos["nodes"][0]["location"]["name"]
                    return
            except (urllib.error.URLError, ConnectionError, RuntimeError, TimeoutError):
                pass
            time.sleep(1)
        raise TimeoutError("kohaku ui did not come up")

    @property
    def repo_selector(self) -> dict[str, str]:
        return {"repositoryName": self.repository, "repositoryLocationName": self.location}

    def launch(self, job: str, partition: str) -> str:
        data = self.gql(
            """mutation($p: ExecutionParams!) { launchPipelineExecution(executionParams: $p) {
                __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
                ... on PipelineConfigValidationInvalid { errors { message } } } }""",
            p={
                "selector": {**self.repo_selector, "pipelineName": job},
                "runConfigData": {},
                "executionMetadata": {"tags": [{"key": "dagster/partition", "value": partition}]},
            },
        )["launchPipelineExecution"]
        if data["__typename"] != "LaunchRunSuccess":
            raise RuntimeError(f"launch {job}[{partition}]: {data}")
        return str(data["run"]["runId"])

    def reexecute(self, parent_run_id: str) -> str:
        data = self.gql(
            """mutation($p: ReexecutionParams!) { launchRunReexecution(reexecutionParams: $p) {
                __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }""",
            p={"parentRunId": parent_run_id, "strategy": "ALL_STEPS"},
        )["launchRunReexecution"]
        if data["__typename"] != "LaunchRunSuccess":
            raise RuntimeError(f"re-execute {parent_run_id}: {data}")
        return str(data["run"]["runId"])

    def run_status(self, run_id: str) -> str:
        data = self.gql("query($id: ID!) { runOrError(runId: $id) { __typename ... on Run { status } } }", id=run_id)[
            "runOrError"
        ]
        return str(data.get("status", data["__typename"]))

    def wait_run(self, run_id: str, timeout: float = 600) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.run_status(run_id)
            if status in DONE:
                return status
            time.sleep(0.5)
        raise TimeoutError(f"run {run_id} not finished after {timeout:.0f}s")

    def add_partition(self, partitions: str, key: str) -> None:
        self.gql(
            """mutation($r: RepositorySelector!, $d: String!, $k: String!) {
                addDynamicPartition(repositorySelector: $r, partitionsDefName: $d, partitionKey: $k) { __typename } }""",
            r=self.repo_selector,
            d=partitions,
            k=key,
        )

    def backfill(self, job: str, partitions: list[str]) -> str:
        data = self.gql(
            """mutation($b: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $b) {
                __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }""",
            b={
                "selector": {"partitionSetName": f"{job}_partition_set", "repositorySelector": self.repo_selector},
                "partitionNames": partitions,
            },
        )["launchPartitionBackfill"]
        if data["__typename"] != "LaunchBackfillSuccess":
            raise RuntimeError(f"backfill {job}{partitions}: {data}")
        return str(data["backfillId"])

    def runs(self, tags: dict[str, str] | None = None, job: str | None = None) -> list[dict[str, Any]]:
        flt: dict[str, Any] = {}
        if tags:
            flt["tags"] = [{"key": k, "value": v} for k, v in tags.items()]
        if job:
            flt["pipelineName"] = job
        data = self.gql(
            """query($f: RunsFilter) { runsOrError(filter: $f) { __typename ... on Runs { results {
                runId status jobName repositoryOrigin { repositoryLocationName }
                tags { key value } } } } }""",
            f=flt,
        )["runsOrError"]
        return list(data["results"])

    def job_runs(self, job: str) -> list[dict[str, Any]]:
        """The runs the job's page lists (filtered by job and repository, as the UI does)."""
        data = self.gql(
            """query($s: PipelineSelector!) { pipelineOrError(params: $s) { __typename
                ... on Pipeline { runs { runId status } } } }""",
            s={**self.repo_selector, "pipelineName": job},
        )["pipelineOrError"]
        return list(data.get("runs", []))

    def backfill_status(self, backfill_id: str) -> str:
        data = self.gql(
            "query($id: String!) { partitionBackfillOrError(backfillId: $id) { __typename"
            " ... on PartitionBackfill { status } } }",
            id=backfill_id,
        )["partitionBackfillOrError"]
        return str(data.get("status", data["__typename"]))

    def asset_node(self, asset: str, fields: str) -> dict[str, Any]:
        data = self.gql(
            "query($k: AssetKeyInput!) { assetNodeOrError(assetKey: $k) { __typename ... on AssetNode { "
            + fields
            + " } } }",
            k={"path": [asset]},
        )["assetNodeOrError"]
        return dict(data)

    def stale(self, asset: str, partition: str) -> tuple[str, list[str]]:
        """The asset partition's stale status, as the asset graph shows it, and the causes."""
        node = self.asset_node(
            asset,
            "staleStatusByPartition(partitions: [$p]) staleCausesByPartition(partitions: [$p]) "
            "{ reason key { path } dependency { path } }".replace("$p", json.dumps(partition)),
        )
        causes = (node.get("staleCausesByPartition") or [[]])[0]
        return str((node.get("staleStatusByPartition") or ["?"])[0]), [c["reason"] for c in causes]

    def sensor_ticks(self, name: str) -> list[dict[str, Any]]:
        data = self.gql(
            """query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) { __typename
                ... on Sensor { sensorState { ticks(limit: 5) { status skipReason runKeys
                logEvents { events { message } } } } } } }""",
            s={**self.repo_selector, "sensorName": name},
        )["sensorOrError"]
        return list(data.get("sensorState", {}).get("ticks", []))

    def start_sensor(self, name: str) -> None:
        data = self.gql(
            """mutation($s: SensorSelector!) { startSensor(sensorSelector: $s) { __typename
                ... on Sensor { sensorState { status } } ... on PythonError { message } } }""",
            s={**self.repo_selector, "sensorName": name},
        )["startSensor"]
        if data["__typename"] != "Sensor":
            raise RuntimeError(f"start {name}: {data}")


# ── the browser ────────────────────────────────────────────────────────────


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    raise SystemExit("needs chromium (Debian: apt-get install chromium)")


def browse(url: str, shot: Path, budget_ms: int = 12000) -> str:
    """A screenshot of `url` after its scripts ran, and its rendered DOM."""
    profile = tempfile.mkdtemp(prefix="ui-smoke-chromium-")
    flags = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--window-size=1400,900",
        f"--virtual-time-budget={budget_ms}",
    ]
    try:
        subprocess.run([*flags, f"--screenshot={shot}", url], capture_output=True, timeout=120, check=False)
        dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=False)
        return dom.stdout
    finally:
        shutil.rmtree(profile, ignore_errors=True)


class Checks:
    def __init__(self) -> None:
        self.failed: list[str] = []
        self.passed: list[str] = []

    def check(self, ok: bool, what: str) -> None:
        (self.passed if ok else self.failed).append(what)
        print(f"  {'ok  ' if ok else 'FAIL'} {what}", flush=True)


# ── the steps ──────────────────────────────────────────────────────────────


def write_config(lake: Path, llm_url: str) -> None:
    questions = lake / "smoke_questions.csv"
    lines = ["id,question,answer,answer_value,answer_unit,ref_id"]
    lines += [f"{i},{q},42 {u},42,{u},['sample_gpu_energy']" for i, q, u in QUESTIONS]
    questions.write_text("\n".join(lines) + "\n")
    configs = lake / "configs"
    configs.mkdir(exist_ok=True)
    cfg = {
        "questions": str(questions),
        "retrieval": {"planner_max_queries": 1},
        "generation": {
            "llm": {"backend": "openai", "model": "fake", "base_url": llm_url, "api_key_env": None, "max_retries": 1}
        },
        "voting": {"runs": 1},
    }
    (configs / "smoke.json").write_text(json.dumps(cfg))


def searchable(code: Path, lake: Path, corpus: Path, word: str, doc_id: str) -> bool:
    out = kohaku(code, "search", word, "--lake", str(lake), "--corpus", str(corpus), "--json", timeout=120)
    if out.returncode != 0:
        return False
    return any(item["doc_id"] == doc_id for item in json.loads(out.stdout or "[]"))


def wait_searchable(code: Path, lake: Path, corpus: Path, word: str, doc_id: str, timeout: float = 420) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if searchable(code, lake, corpus, word, doc_id):
            return True
        time.sleep(1)
    return False


def on_leaderboard(lake: Path, config: str) -> bool:
    import pyarrow.parquet as pq

    path = lake / "qa" / "leaderboard.parquet"
    try:
        return config in pq.read_table(path, columns=["config"]).column("config").to_pylist()
    except (OSError, KeyError, ValueError):
        return False


def wait_leaderboard(lake: Path, config: str, timeout: float = 300) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if on_leaderboard(lake, config):
            return True
        time.sleep(0.5)
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=None, help="folder for the lake, corpus and screenshots")
    parser.add_argument("--port", type=int, default=3111)
    parser.add_argument("--code", type=Path, default=REPO, help="the checkout whose `kohaku` runs (default: this one)")
    parser.add_argument("--only", choices=["materialize"], help="stop after step a (to time an older checkout)")
    parser.add_argument(
        "--no-configs-sensor",
        action="store_true",
        help="skip step e (an older checkout's configs_sensor starts `default`, a long run of the bundled LLM)",
    )
    args = parser.parse_args()
    work = (args.work or Path(tempfile.mkdtemp(prefix="ui-smoke-"))).resolve()
    lake, corpus, shots = work / "lake", work / "corpus", work / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    print(f"work folder {work}; screenshots in {shots}", flush=True)
    code = args.code.resolve()
    seconds: dict[str, float] = {}
    checks = Checks()

    t0 = time.perf_counter()
    demo = kohaku(code, "demo", "--no-ask", "--lake", str(lake), "--corpus", str(corpus))
    if demo.returncode != 0:
        print(demo.stdout, demo.stderr)
        raise SystemExit("kohaku demo failed")
    seconds["kohaku demo --no-ask (CLI)"] = time.perf_counter() - t0

    ui_proc: subprocess.Popen[bytes] | None = None
    with FakeLLM() as llm:
        write_config(lake, llm.base_url)
        try:
            t0 = time.perf_counter()
            ui_proc = start_ui(code, lake, corpus, args.port, work / "ui.log")
            ui = UI(args.port)
            ui.wait_ready()
            seconds["kohaku ui up (webserver, daemon, code location)"] = time.perf_counter() - t0
            print(f"UI at {ui.base}; code location {ui.location!r}, repository {ui.repository!r}", flush=True)

            print("0. the demo's CLI runs in the UI", flush=True)
            cli_runs = ui.job_runs("index_document")
            checks.check(len(cli_runs) >= 3, f"index_document lists the demo's runs ({len(cli_runs)})")
            ephemeral = [r for r in ui.runs() if r["jobName"] == "__ephemeral_asset_job__"]
            checks.check(not ephemeral, f"no __ephemeral_asset_job__ runs ({len(ephemeral)})")
            dom = browse(f"{ui.base}/overview/activity/timeline", shots / "0-overview-timeline.png")
            checks.check(
                "index_document" in dom and "No runs" not in dom, "browser: Overview timeline shows index_document"
            )
            job_url = f"{ui.base}/locations/{ui.location}/jobs/index_document/runs"
            dom = browse(job_url, shots / "0-index_document-runs.png")
            checks.check(dom.count("sample_") >= 3, "browser: index_document's runs page lists the demo's partitions")

            # A CLI run is a run of the location's job: the UI can re-execute it.
            if cli_runs:
                rerun = ui.reexecute(cli_runs[-1]["runId"])
                status = ui.wait_run(rerun)
                checks.check(status == "SUCCESS", f"re-executing the CLI run {cli_runs[-1]['runId'][:8]}: {status}")

            print("a. materialize one document from the UI", flush=True)
            t0 = time.perf_counter()
            run_id = ui.launch("index_document", "sample_gpu_energy")
            status = ui.wait_run(run_id)
            seconds["a. materialize one document from the UI"] = time.perf_counter() - t0
            checks.check(status == "SUCCESS", f"index_document[sample_gpu_energy] run {run_id[:8]}: {status}")
            dom = browse(f"{ui.base}/runs/{run_id}", shots / "a-run.png")
            checks.check("sample_gpu_energy" in dom, "browser: the run's page names its partition")

            if args.only != "materialize":
                print("a2. click → searchable: a new document materialized from the UI", flush=True)
                (corpus / "halvorsen_wind.md").write_text(UI_DOC)
                ui.add_partition("documents", "halvorsen_wind")
                t0 = time.perf_counter()
                run_id = ui.launch("index_document", "halvorsen_wind")
                status = ui.wait_run(run_id)
                seconds["a2. click → run done (new document)"] = time.perf_counter() - t0
                found = wait_searchable(code, lake, corpus, "Halvorsen wind farm", "halvorsen_wind")
                seconds["a2. click → searchable (new document)"] = time.perf_counter() - t0
                checks.check(status == "SUCCESS" and found, f"new document from the UI: {status}, searchable {found}")

                print("b. backfill a config", flush=True)
                t0 = time.perf_counter()
                ui.add_partition("configs", "smoke")
                backfill_id = ui.backfill("answer_config", ["smoke"])
                deadline = time.monotonic() + 600
                state = ""
                while time.monotonic() < deadline:
                    state = ui.backfill_status(backfill_id)
                    if state in {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}:
                        break
                    time.sleep(1)
                seconds["b. backfill answer_config[smoke]"] = time.perf_counter() - t0
                listed = wait_leaderboard(lake, "smoke")
                seconds["b. click → leaderboard lists smoke"] = time.perf_counter() - t0
                checks.check(listed, "the leaderboard lists the backfilled config")
                runs = ui.runs(tags={"dagster/backfill": backfill_id})
                checks.check(
                    state.startswith("COMPLETED") and bool(runs) and all(r["status"] == "SUCCESS" for r in runs),
                    f"backfill {backfill_id}: {state}, runs {[r['status'] for r in runs]}",
                )
                checks.check(llm.requests != [], f"the config asked the fake LLM ({len(llm.requests)} requests)")
                browse(f"{ui.base}/overview/backfills/{backfill_id}", shots / "b-backfill.png")

                print("c. corpus sensor: drop a new document", flush=True)
                ui.start_sensor("corpus_sensor")
                t0 = time.perf_counter()
                (corpus / "zephyrine_cooling.md").write_text(NEW_DOC)
                found = False
                deadline = time.monotonic() + 420
                while time.monotonic() < deadline and not found:
                    time.sleep(5)
                    found = searchable(code, lake, corpus, "Zephyrine immersion cooling", "zephyrine_cooling")
                seconds["c. sensor: new document searchable"] = time.perf_counter() - t0
                checks.check(found, "kohaku search returns the new document")
                browse(f"{ui.base}/assets/vector_index", shots / "c-vector_index.png")
                browse(f"{ui.base}/runs", shots / "c-runs.png")

                print("d. the lineage, and answers older than the index", flush=True)
                deps = ui.asset_node("retrievals", "dependencyKeys { path }").get("dependencyKeys", [])
                upstream = {"/".join(d["path"]) for d in deps}
                checks.check(
                    {"vector_index", "bm25_index", "search_aids"} <= upstream,
                    f"retrievals depends on the indexes ({sorted(upstream)})",
                )
                browse(f"{ui.base}/assets/retrievals?view=lineage&lineageScope=upstream", shots / "d-lineage.png")
                before = len(ui.runs(job="answer_config"))
                status_causes: tuple[str, list[str]] = ("?", [])
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    status_causes = ui.stale("retrievals", "smoke")
                    if status_causes[0] == "STALE":
                        break
                    time.sleep(2)
                checks.check(status_causes[0] == "STALE", f"retrievals[smoke] after the re-index: {status_causes}")
                browse(f"{ui.base}/assets/retrievals?partition=smoke", shots / "d-retrievals-stale.png")
                browse(f"{ui.base}/asset-groups/answering", shots / "d-answering-group.png")
                after = len(ui.runs(job="answer_config"))
                checks.check(after == before, f"no answer_config run started by the re-index ({before} → {after})")

            if args.only != "materialize" and not args.no_configs_sensor:
                print("e. configs_sensor turned on with old configs present", flush=True)
                ui.start_sensor("configs_sensor")
                t0 = time.perf_counter()
                ticks: list[dict[str, Any]] = []
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline and not ticks:
                    time.sleep(2)
                    ticks = [t for t in ui.sensor_ticks("configs_sensor") if t["status"] != "STARTED"]
                launched = [
                    r
                    for r in ui.runs(job="answer_config")
                    if {"key": "dagster/partition", "value": "default"} in r["tags"]
                ]
                checks.check(bool(ticks) and not launched, f"nothing launched for `default` ({len(launched)} runs)")
                logs = [e["message"] for t in ticks for e in (t.get("logEvents") or {}).get("events", [])]
                print(f"  first tick: {ticks[:1]}; log: {logs[:3]}", flush=True)
                browse(f"{ui.base}/locations/{ui.location}/sensors/configs_sensor", shots / "e-configs_sensor.png")
                seconds["e. configs_sensor first tick"] = time.perf_counter() - t0

            dom = browse(f"{ui.base}/overview/activity/timeline", shots / "z-overview-timeline.png")
            checks.check("No runs" not in dom, "browser: Overview timeline at the end")
            bad = [r for r in ui.runs() if r["status"] in FAILED]
            checks.check(not bad, f"no failed or canceled runs ({[(r['jobName'], r['status']) for r in bad]})")
        except (TimeoutError, RuntimeError) as exc:
            checks.check(False, f"{type(exc).__name__}: {exc}")
        finally:
            if ui_proc is not None:
                stop(ui_proc)

    print("\nseconds", flush=True)
    for what, secs in seconds.items():
        print(f"  {secs:7.1f}  {what}")
    print(f"checks: {len(checks.passed)} passed, {len(checks.failed)} failed; screenshots in {shots}")
    for what in checks.failed:
        print(f"FAILED: {what}")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
