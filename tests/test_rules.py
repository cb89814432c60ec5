"""The Python package applies the Cache's rules as ziggurat-cache's table says (the native
module's ``rules()``): each value a module of the package uses on its own side (the tag
limits, every option default, the mode names, the step kinds, the JSON depth, the metric
labels) is checked against the table, and so are the defaults docs/api.md writes down.
"""

from __future__ import annotations

import ast
import inspect
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from ziggurat import Cache, _native, args, metric_samples, options, rules
from ziggurat.loader import StepKind
from ziggurat.serializers import resolve

ROOT = Path(__file__).resolve().parent.parent
TABLE: dict[str, Any] = _native.rules()


def group(name: str) -> dict[str, Any]:
    """The table's rules of one group, by the name after the group's."""
    return {k.split(".", 1)[1]: v for k, v in TABLE.items() if k.startswith(name + ".")}


def test_the_package_reads_the_whole_table() -> None:
    assert dict(rules.RULES) == TABLE
    assert {"tags", "key", "defaults", "modes", "steps", "codes", "envelope", "metrics"} == {
        k.split(".", 1)[0] for k in TABLE
    }


def test_tag_limits() -> None:
    assert args.MAX_TAGS == rules.MAX_TAGS == TABLE["tags.max"] == _native.MAX_TAGS
    assert rules.MIN_TAG_BYTES == TABLE["tags.min_bytes"] == 1
    assert TABLE["key.max_bytes"] == args.MAX_KEY
    with pytest.raises(ValueError, match="a tag must not be empty"):
        args.tags_arg(["a", ""], "Cache.set")


def test_every_option_default_of_the_signature_is_the_tables() -> None:
    signature = inspect.signature(Cache.__init__).parameters
    defaults = group("defaults")
    share = defaults.pop("l1_negative_share")
    for name, value in defaults.items():
        assert signature[name].default == value, name
        assert getattr(rules.DEFAULTS, name) == value, name
    written = {
        n: p.default
        for n, p in signature.items()
        if all(p.default is not v for v in (None, False, p.empty)) and n != "self"
    }
    assert set(written) == set(defaults), "a default not in the table (or the reverse)"
    o = Cache.options(f"rules-{uuid.uuid4().hex[:8]}")
    assert o.l1_negative_items == o.l1_items // share
    assert (o.ttl, o.neg_ttl, o.jitter) == (
        defaults["ttl"],
        defaults["neg_ttl"],
        defaults["jitter"],
    )
    assert o.loader_timeout == defaults["loader_timeout"]
    assert (o.copy, o.degraded, o.huge_pages) == (
        defaults["copy"],
        defaults["degraded"],
        defaults["huge_pages"],
    )


@pytest.mark.parametrize(
    ("option", "rule"), [("copy", "copy"), ("degraded", "degraded"), ("huge_pages", "huge_pages")]
)
def test_mode_names(option: str, rule: str) -> None:
    names = TABLE[f"modes.{rule}"]
    for mode in names:
        assert getattr(Cache.options("rules-modes", **{option: mode}), option) == mode
    with pytest.raises(ValueError, match=f"{option} must be"):
        Cache.options("rules-modes", **{option: "none-of-them"})
    assert TABLE["modes.degraded"] == options.DEGRADED_MODES
    assert TABLE["modes.copy"] == rules.COPY_MODES
    assert TABLE["modes.huge_pages"] == rules.HUGE_PAGES_MODES


def test_step_kinds() -> None:
    assert {k.name: k.value for k in StepKind} == group("steps")


def test_json_depth() -> None:
    depth = TABLE["envelope.max_depth"]

    def nested(n: int) -> list[Any]:
        v: list[Any] = []
        for _ in range(n - 1):
            v = [v]
        return v

    auto = resolve("auto")
    assert auto.dumps(nested(depth))[:1] == b"["
    assert auto.dumps(nested(depth + 1))[:1] == b"\x80", "past the depth: a pickle"


def test_metric_labels(shm_dir: str) -> None:
    labels = {s.labels for s in metric_samples.SPECS}
    metrics = group("metrics")
    tables = {tuple(v) for k, v in metrics.items() if k.endswith("labels")}
    assert labels == tables
    c = Cache(f"rules-{uuid.uuid4().hex[:8]}", "4MiB", directory=shm_dir)
    try:
        c.set("k", 1)
        rows = metric_samples.rows(c)
    finally:
        c.close()
    assert {tuple(labels) for _, labels, _ in rows} <= tables
    assert {s.labels for s, _, _ in rows} == tables
    for spec, values, _ in rows:
        assert tuple(values) == spec.labels
    tiers = {values["tier"] for _, values, _ in rows if "tier" in values}
    assert tiers == set(metrics["tiers"])


def _docs_defaults(text: str) -> dict[str, str]:
    """The ``| `option` | `default` |`` cells of the option table of docs/api.md."""
    return dict(re.findall(r"^\| `(\w+)` \| `([^`]+)` \|", text, re.M))


def test_the_defaults_in_the_docs_are_the_tables() -> None:
    written = _docs_defaults((ROOT / "docs" / "api.md").read_text(encoding="utf-8"))
    defaults = group("defaults")
    checked = 0
    for name, value in written.items():
        if name in defaults:
            assert ast.literal_eval(value) == defaults[name], name
            checked += 1
        elif name == "l1_negative_items":
            assert value == f"l1_items // {defaults['l1_negative_share']}"
            checked += 1
    assert checked >= 15, written
