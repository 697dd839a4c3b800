"""Run the `ccl` command in-process and capture what it prints (for the CLI tests)."""
import io
from contextlib import redirect_stderr, redirect_stdout

from ccl.cli.main import main


def run(*argv):
    """(exit code, stdout, stderr) of `ccl ARGV...`; argparse's own writes are captured too."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(list(argv), out, err)
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        code = exc.code
    return code, out.getvalue(), err.getvalue()
