"""compat_matrix/ is generated from kwker.support and must match it."""
from kwker import compat, support


def test_committed_matrix_is_fresh():
    """Fails when support.py changed without `python -m kwker.compat`."""
    assert compat.main(["--check"]) == 0


def test_matrix_lists_every_op_and_condition():
    m = compat.matrix()
    assert set(m["ops"]) == set(support.OPS)
    for op, sup in support.OPS.items():
        keys = {c["key"] for c in m["ops"][op]["falls_back_when"]}
        assert keys == {c.key for c in sup.conditions if c is not support.DTYPE}
        fast = {d for d, path in m["ops"][op]["dtypes"].items() if path == "fast"}
        assert fast == {str(d).replace("torch.", "") for d in sup.dtypes}
    assert set(m["size_rules"]) == set(support.DEFAULT_SIZE_RULES)
    text = compat.markdown(m)
    for op, rule in support.DEFAULT_SIZE_RULES.items():
        if rule.min_numel:
            assert f"| {op} | fewer than {rule.min_numel} elements" in text
    assert f"rows shorter than {support.DEFAULT_SIZE_RULES['topk'].nth_min_row} and int64 rows" in text


def test_framework_rows_name_real_tests():
    """Every framework row of the matrix names tests that exist, so no row
    is a claim without a test behind it."""
    import ast
    import os
    from kwker import support
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for framework in support.FRAMEWORKS:
        assert framework.tests, framework.name
        for ref in framework.tests:
            path, name = ref.split("::")
            with open(os.path.join(root, path)) as f:
                tree = ast.parse(f.read())
            names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
            assert name in names, f"{framework.name}: {ref} does not exist"
