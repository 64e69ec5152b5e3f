"""What trying llama.cpp's CPU variants costs, and what each variant is worth, on this machine.

    python bench/answering/cpu_variants.py [--prompt-tokens 1000]

1. The trial's cost (kohaku_rag/llm/cpu_verdicts.py): a fresh process loads the bundled model's
   CPU code three ways, each in a new folder (so no verdict is kept yet), timed as a whole:
   - "plain load": the variant loaded straight away, no trial (what the code did before);
   - "first run": no verdict yet, so the variants are tried in child processes first;
   - "later run": the verdict the first run kept is read, no trial.
   The trial's cost is first - plain; a later run's is later - plain (0 expected).
2. Prefill and generation tokens/s of every variant that can run on this CPU (chosen with
   KOHAKU_LLAMA_CPU), on one ~1000-token prompt, each in its own process.

Run it alone on a quiet machine: it prints the load average first.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

LOAD = """
import sys
from pathlib import Path
from kohaku_rag.llm.cpu_verdicts import trusted_cpu_backend
print(trusted_cpu_backend(Path(sys.argv[1])))
"""

SPEED = """
import json, sys
from pathlib import Path
from bench.answering.llm_speed import context_prompt
from kohaku_rag.llm.base import ChatRequest, Message
from kohaku_rag.llm.llama import LlamaCppChat
llm = LlamaCppChat(Path(sys.argv[1]), n_ctx=4096, prefix_cache=False)
llm.complete(ChatRequest((Message("user", "hi"),), max_tokens=2))
llm.complete(ChatRequest(context_prompt(llm, int(sys.argv[2]), "a"), max_tokens=1))
pre = llm.last_timings
llm.complete(ChatRequest((Message("user", "Write a long story about a lighthouse."),), max_tokens=64))
gen = llm.last_timings
print(json.dumps({"prefill": pre.prompt_tokens_evaluated / (pre.prompt_ms / 1000),
                  "generation": gen.generated_tokens / (gen.generation_ms / 1000)}))
"""


def timed(code: str, *args: str, env: dict[str, str] | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=REPO, check=True
    )
    return time.perf_counter() - started, done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt-tokens", type=int, default=1000)
    args = parser.parse_args()

    from kohaku_rag.llm.cpu_backends import llama_package_dir, variant_folder, variant_libraries, variant_score
    from kohaku_rag.llm.cpu_verdicts import VARIANT_ENV
    from kohaku_rag.llm.model_files import bundled_model

    model = bundled_model()
    print(f"load average {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores; model {model.name}")
    folder = variant_folder(llama_package_dir())
    assert folder is not None, "this llama.cpp has no per-CPU variants"
    env = {k: v for k, v in os.environ.items() if k != VARIANT_ENV}

    with tempfile.TemporaryDirectory() as tmp:
        link = Path(tmp) / model.name
        link.symlink_to(model)
        first, line = timed(LOAD, str(link), env=env)
        later, _ = timed(LOAD, str(link), env=env)
        best = line.removeprefix("llama.cpp CPU backend: ").split(" ")[0]
        plain, _ = timed(LOAD, str(link), env={**env, VARIANT_ENV: best})
        kept = json.loads(next((Path(tmp) / "cpu-verdicts").glob("*.json")).read_text())
    print(line)
    print("trials:", ", ".join(f"{t['variant']} {t['outcome']} in {t['seconds']:.1f} s" for t in kept["trials"]))
    print(f"plain load (no trial):  {plain:6.2f} s")
    print(f"first run (trial):      {first:6.2f} s   trial cost {first - plain:+.2f} s")
    print(f"later run (verdict):    {later:6.2f} s   cost {later - plain:+.2f} s")

    runnable = [name for name, lib in variant_libraries(folder).items() if variant_score(lib) > 0]
    print(f"\nvariants that run on this CPU: {', '.join(runnable)} ({args.prompt_tokens}-token prompt)")
    for name in runnable:
        _, out = timed(SPEED, str(model), str(args.prompt_tokens), env={**env, VARIANT_ENV: name})
        speed = json.loads(out.splitlines()[-1])
        print(f"  {name:10s} prefill {speed['prefill']:6.1f} tok/s   generation {speed['generation']:5.1f} tok/s")


if __name__ == "__main__":
    main()
