"""Run the `cepsql ...` lines of a docs page's bash blocks, in order, in the current folder
(tests/test_docs.py starts one per page in the background). ``pip install`` lines are
skipped (they would install from the network); any other command is refused. Exits 1
with the failing command and its stderr."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.M | re.S)


def commands(page: Path) -> list[list[str]]:
    out = []
    for lang, block in FENCE.findall(page.read_text()):
        if lang != "bash":
            continue
        for line in block.splitlines():
            command = line.split("  #")[0].strip()
            if command and not command.startswith("pip install"):
                out.append(shlex.split(command))
    return out


def main(page: str) -> int:
    for words in commands(Path(page)):
        if words[0] != "cepsql":
            print(f"only cepsql commands run here: {shlex.join(words)}", file=sys.stderr)
            return 1
        done = subprocess.run([sys.executable, "-m", "cepsql", *words[1:]], capture_output=True,
                              text=True, timeout=600, stdin=subprocess.DEVNULL)
        if done.returncode:
            print(f"{shlex.join(words)}\n{done.stderr[-3000:]}", file=sys.stderr)
            return 1
        print(shlex.join(words))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
