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


def test_typed_plan_parts_are_keyed_by_content_though_an_element_is_unhashable():
    from ccl.plan.model import Column, Element
    from ccl.syntax import nodes as n

    calls = []

    @once
    def build(element: Element) -> list:
        calls.append(element.name)
        return [c.name for c in element.columns]

    def reference(column_type: str, value: int) -> Element:
        # a reference's properties are a dict: the element has no hash
        return Element("r", "reference", "local", None, None, (Column("x", column_type),), ("x",),
                       properties={"size": n.Literal(value, "integer")})

    first = build(reference("integer", 1))
    assert build(reference("integer", 1)) is first and calls == ["r"]  # equal content, new object
    assert build(reference("long", 1)) is not first
    assert build(reference("integer", 2)) is not first  # a property's tree differs
    assert calls == ["r", "r", "r"]
