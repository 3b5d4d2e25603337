"""Random experiment trees for the scope properties: ids that share prefixes, never scope."""

from __future__ import annotations

from hypothesis import strategies as st

WORDS = ["stencil", "tiling", "cache", "omp", "roofline", "vector", "halo", "bandwidth", "failed", "build"]
SUFFIXES = ["1", "12", "2", "21"]  # n1 / n12, n2 / n21: sibling ids share prefixes


@st.composite
def trees(draw: st.DrawFn, *, full_levels: int, max_children: int) -> dict[str, list[str]]:
    """node id → ancestors (root→parent), three or four levels; every node of the first
    ``full_levels`` levels has at least one child, none more than ``max_children``."""
    tree: dict[str, list[str]] = {"root": []}
    frontier = ["root"]
    for depth in range(draw(st.integers(3, 4))):
        nxt = []
        for parent in frontier:
            min_size = 1 if depth < full_levels else 0
            for suffix in draw(
                st.lists(st.sampled_from(SUFFIXES), min_size=min_size, max_size=max_children, unique=True)
            ):
                child = f"{parent}_{suffix}" if parent != "root" else f"n{suffix}"
                tree[child] = tree[parent] + [parent]
                nxt.append(child)
        frontier = nxt
    return tree
