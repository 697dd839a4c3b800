"""runtime.built_once: expressions built once per plan content (no Spark needed)."""
from runtime.built_once import once


def test_a_result_is_reused_for_equal_plan_content_and_rebuilt_for_other_content():
    calls = []

    @once
    def build(element: dict, names: tuple) -> list:
        calls.append(element["name"])
        return [element["name"], *names]

    first = build({"name": "a", "columns": [["x", "integer"]]}, ("x",))
    again = build({"columns": [["x", "integer"]], "name": "a"}, ("x",))  # equal content, new dict
    assert again is first and calls == ["a"]
    assert build({"name": "a", "columns": [["x", "long"]]}, ("x",)) is not first
    assert build({"name": "a", "columns": [["x", "integer"]]}, ("y",)) == ["a", "y"]
    assert calls == ["a", "a", "a"]
