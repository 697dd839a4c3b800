"""The README's commands are the ones CI runs, and they name files that exist."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci_command = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci_command in readme
    head = readme.split("## ")[0]
    assert head.index("ccl run projects/") < head.index(ci_command)


def test_readme_example_project_exists():
    readme = (ROOT / "README.md").read_text()
    path = readme.split("ccl run ", 1)[1].split()[0]
    assert (ROOT / path).is_file()
