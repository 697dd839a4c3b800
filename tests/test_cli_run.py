"""`ccl run` refusals that happen before Spark starts: exit codes and messages, no traceback."""
from cli_runner import run

GOOD = "create input stream s schema (id integer);\ncreate output stream o as select * from s;\n"


def test_project_errors_are_diagnostics_and_nothing_runs(tmp_path):
    src = tmp_path / "p.ccl"
    src.write_text("create output stream o as select x.a from x;\n")
    code, out, err = run("run", str(src), "--until-idle")
    assert code == 1 and out == ""
    assert f"{src}:1:" in err and "error CCL" in err and "not run" in err
    assert "Traceback" not in err


def test_bad_input_bindings_are_usage_errors(tmp_path):
    src = tmp_path / "p.ccl"
    src.write_text(GOOD)
    code, _, err = run("run", str(src), "--input", f"s={tmp_path / 'missing.csv'}")
    assert code == 2 and "does not exist" in err
    (tmp_path / "d.csv").write_text("id\n1\n")
    code, _, err = run("run", str(src), "--input", f"nosuch={tmp_path / 'd.csv'}")
    assert code == 2 and "no input element" in err
    code, _, err = run("run", str(src), "--input", "s")
    assert code == 2 and "ELEMENT=PATH" in err


def test_hdfs_state_store_is_refused(tmp_path):
    src = tmp_path / "p.ccl"
    src.write_text(GOOD)
    code, _, err = run("run", str(src), "--set", "spark.state_store=hdfs")
    assert code == 2 and "rocksdb" in err


def test_output_and_checkpoint_paths_that_cannot_be_directories_are_usage_errors(tmp_path):
    """They used to fail after the whole run, with a traceback and the outputs lost."""
    src = tmp_path / "p.ccl"
    src.write_text(GOOD)
    (tmp_path / "afile").write_text("")
    for option in ("--output-dir", "--checkpoint"):
        code, _, err = run("run", str(src), "--until-idle", option, str(tmp_path / "afile"))
        assert code == 2 and f"{option} {tmp_path / 'afile'}: is a file, not a directory" in err
        code, _, err = run("run", str(src), "--until-idle", option, str(tmp_path / "afile" / "sub"))
        assert code == 2 and "cannot make the directory" in err and "Traceback" not in err


def test_inputs_bound_to_no_existing_file_get_a_note(tmp_path):
    """A misspelt dir, file or pattern read nothing and the run ended with 0 rows, silently."""
    from ccl.plan.planner import plan_project
    from runtime.run_setup import RunOptions, inputs_without_files
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("id\n1\n")
    (tmp_path / "p.ccl").write_text(
        "create input stream s schema (id integer);\ncreate input stream t schema (id integer);\n"
        "create input stream u schema (id integer);\ncreate input stream v schema (id integer);\n"
        "attach input adapter a type toolkit_file_csv_input to s properties dir = 'in', file = 'a.csv';\n"
        "attach input adapter b type toolkit_file_csv_input to t properties dir = 'nope';\n"
        "attach input adapter c type dsv_in to u properties dir = 'in', filePattern = '*.txt';\n")
    plan, diags = plan_project(str(tmp_path / "p.ccl"))
    assert plan is not None, [str(d) for d in diags]
    notes = inputs_without_files(plan, RunOptions(inputs={}, base_dir=str(tmp_path)))
    assert notes == [f"input 't' has no file yet: nothing matches {tmp_path / 'nope' / '*'} "
                     "(the directory does not exist)",
                     f"input 'u' has no file yet: nothing matches {tmp_path / 'in' / '*.txt'}"]
