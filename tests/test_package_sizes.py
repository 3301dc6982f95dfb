"""No library package holds more than 30% of the library's lines (issue 22: `algorithms/` had 44%)."""
from scripts.package_table import MAX_SHARE, layers, markdown_table, package_sizes


def test_every_layer_is_a_package_and_none_holds_more_than_its_share():
    sizes = package_sizes()
    assert set(sizes) == set(layers()) and all(files > 0 for files, _ in sizes.values())
    total = sum(lines for _, lines in sizes.values())
    too_big = {p: round(lines / total, 3) for p, (_, lines) in sizes.items() if lines > MAX_SHARE * total}
    assert not too_big, f"packages over {MAX_SHARE:.0%} of the library's lines: {too_big}"


def test_the_table_lists_every_package_and_the_total():
    table = markdown_table({"a": (1, 30), "b": (2, 70)})
    assert "| `a/` | 1 | 30 | 30.0% |" in table and "| total | 3 | 100 | 100% |" in table
