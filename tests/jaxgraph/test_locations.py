"""The incremental location index equals a full re-scan after every rewrite (reference twin parity)."""

import numpy as np
import pytest

from jaxgraph import RULES, LocationIndex

from .conftest import SMALL, small_model


@pytest.mark.parametrize("name", sorted(SMALL))
def test_incremental_index_matches_full_scan_along_random_walks(name):
    rng = np.random.default_rng(len(name))
    for _ in range(2):
        graph = small_model(name)
        index = LocationIndex.build(RULES, graph)
        while len(index):
            matches = index.matches()
            xfer, location = matches[rng.integers(len(matches))]
            graph, delta = RULES[xfer].rewrite(graph, location)
            index = index.update(graph, delta)
            full = LocationIndex.build(RULES, graph)
            assert index.by_rule == full.by_rule
        assert not any(rule.find(graph) for rule in RULES)


def test_update_shares_unchanged_rules_and_keeps_the_parent():
    graph = small_model("resnet18")
    index = LocationIndex.build(RULES, graph)
    before = index.by_rule
    xfer, location = index.matches()[0]
    child, delta = RULES[xfer].rewrite(graph, location)
    updated = index.update(child, delta)
    assert index.by_rule == before  # immutable
    unchanged = [x for x in range(len(RULES)) if updated.by_rule[x] is index.by_rule[x]]
    assert len(unchanged) >= len(RULES) - 3
    assert location not in updated.locations(xfer)
    assert updated.locations(xfer) == tuple(sorted(updated.by_rule[xfer]))
