"""Print, briefly, the Ansible tasks that failed in a molecule log.

CI shows only the tail of its output; a failed scenario ends with
molecule's own summary, which names the stage but not the task. This
prints each failed task and the first lines of its message last, where
the tail will hold them.

usage: python3 .ci/failure_summary.py LOG [MAX_LINES]
"""
import json
import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
FAILED = re.compile(r"^(fatal|failed): \[")
TASK = re.compile(r"^TASK \[")


def clean(line):
    line = ANSI.sub("", line.rstrip("\n"))
    return re.sub(r"^\s*[│┌└─]\s?", "", line).rstrip()


def describe(block):
    """The failure's host, message, rc and the last lines of its output."""
    head, _sep, rest = block[0].partition(" => ")
    try:
        result = json.loads(" ".join([rest] + block[1:]))
    except ValueError:
        return [line[:300] for line in block[:12]]
    out = [head]
    for key in ("msg", "rc", "cmd"):
        if key in result:
            out.append("  %s: %s" % (key, str(result[key])[:300]))
    for key in ("stderr_lines", "stdout_lines"):
        tail = result.get(key) or []
        if tail:
            out.append("  %s (last %d):" % (key[:-6], min(len(tail), 8)))
            out.extend("    " + str(line)[:300] for line in tail[-8:])
    return out


def summary(lines, budget):
    out = []
    task = None
    for i, line in enumerate(lines):
        if TASK.match(line):
            task = line
        elif FAILED.match(line):
            end = i + 1
            while end < len(lines) and lines[end] and not lines[end].startswith(("TASK [", "PLAY")):
                end += 1
            block = lines[i:end]
            if any(entry.startswith("...ignoring") for entry in block):
                continue
            out.append(task or "(no task line)")
            out.extend(describe(block))
            out.append("")
    return out[-budget:]


def main():
    path = sys.argv[1]
    budget = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    with open(path, encoding="utf-8", errors="replace") as log:
        lines = [clean(line) for line in log]
    found = summary(lines, budget)
    print("=== failed tasks in %s ===" % path)
    print("\n".join(found) if found else "(no failed task found)")


if __name__ == "__main__":
    main()
