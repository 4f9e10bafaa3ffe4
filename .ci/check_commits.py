"""Commit messages since this check was added: a subject of at most 72 characters, a blank line, a body.

`make lint` runs it (CI too).  History before the commit that added this file is not checked (it is
never rewritten).  Commits made before STRICT_FROM (the session that added the check was still landing
work under the old habit) are listed as warnings; from then on a commit that breaks the rule fails.  A
commit that landed breaking it anyway cannot be fixed without rewriting main: list its hash with the
reason in `.ci/commit-exceptions` (one `<hash> <why>` per line).
Exit 0 when every checked commit follows the rule (or this is not a git checkout: said and skipped).
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_SUBJECT = 72
SELF = ".ci/check_commits.py"
STRICT_FROM = datetime.fromisoformat("2026-12-02T00:20:00+00:00")   # committer date


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout


def problems(commit: str) -> list[str]:
    message = git("log", "-1", "--format=%B", commit)
    subject, _, rest = message.partition("\n")
    found = []
    if len(subject) > MAX_SUBJECT:
        found.append(f"subject is {len(subject)} characters (at most {MAX_SUBJECT})")
    if rest.strip() and rest.split("\n", 1)[0].strip():
        found.append("no blank line after the subject")
    if not rest.strip():
        found.append("no body (say what you ran and saw)")
    return found


def main() -> int:
    try:
        git("rev-parse", "--git-dir")
    except (OSError, subprocess.CalledProcessError):
        print("check_commits: not a git checkout; skipped")
        return 0
    added = git("log", "--format=%H", "--diff-filter=A", "--", SELF).split()
    if not added:
        print(f"check_commits: {SELF} is not committed yet (or the clone is shallow); skipped")
        return 0
    first = added[-1]
    has_parent = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "-q", "--verify", f"{first}^"],
                                capture_output=True).returncode == 0
    commits = git("rev-list", "--no-merges", f"{first}^..HEAD" if has_parent else "HEAD").split()
    exceptions_file = ROOT / ".ci" / "commit-exceptions"
    excepted = {line.split()[0] for line in exceptions_file.read_text().splitlines()
                if line.strip() and not line.startswith("#")} if exceptions_file.is_file() else set()
    bad = warned = 0
    for commit in commits:
        if any(commit.startswith(e) for e in excepted):
            continue
        strict = datetime.fromisoformat(git("log", "-1", "--format=%cI", commit).strip()) >= STRICT_FROM
        for problem in problems(commit):
            subject = git("log", "-1", "--format=%s", commit).strip()
            if strict:
                bad += 1
                print(f"{commit[:10]} {subject[:60]!r}: {problem}")
            else:
                warned += 1
    if warned:
        print(f"check_commits: {warned} problem(s) in commits made before {STRICT_FROM:%Y-%m-%d %H:%M} UTC "
              "(not failing: the rule applies from then on)")
    if bad:
        print(f"check_commits: {bad} problem(s) in commit messages since {first[:10]}. New commits: "
              f"`git commit --amend` before landing; landed ones go in .ci/commit-exceptions with why.")
        return 1
    print(f"check_commits: {len(commits)} commit message(s) since {first[:10]} checked: none fails")
    return 0


if __name__ == "__main__":
    sys.exit(main())
