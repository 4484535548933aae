"""YAML composed with a bound on what its aliases expand to.

PyYAML composes an alias as one more reference to the node its anchor names, so
ten lines of aliases to aliases ("billion laughs") stand for billions of nodes,
and an alias inside its own anchor for infinitely many: whatever then walks or
prints the document never ends. Compose files do use anchors (`x-common: &common`,
`<<: *common`), so aliases are allowed, but a file whose documents expand past
MAX_NODES, or that holds a recursive alias, is refused before anyone walks it.
"""
from __future__ import annotations

import yaml

# A 256 KB deploy file holds at most about 128,000 nodes written out ("1," each), so
# only aliases can take a file past this.
MAX_NODES = 200_000


class AliasBomb(yaml.YAMLError):
    """A document whose aliases expand it past MAX_NODES, or refer to a node that contains them."""


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def expanded_size(root: yaml.Node, budget: int = MAX_NODES) -> int:
    """How many nodes `root` stands for once every alias is written out; AliasBomb past `budget`.

    Each node is measured once (a shared node counts each time it is referred to, without
    being walked again), with an explicit stack, so neither size nor depth costs more than
    the composed document itself."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            if sizes[key] > budget:
                raise AliasBomb(f"its aliases expand it past {budget:,} nodes (an alias bomb, most likely)")
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise AliasBomb(f"a recursive alias: the node at line {node.start_mark.line + 1} contains itself")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    return sizes[id(root)]


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader that measures each document as it is composed, against one budget per file."""

    def __init__(self, stream):
        super().__init__(stream)
        self.budget = MAX_NODES

    def compose_document(self):
        document = super().compose_document()
        if document is not None:
            self.budget -= expanded_size(document, self.budget)
        return document


def compose_all(text: str) -> list[yaml.Node]:
    """Every document of `text` as PyYAML nodes (they keep their line numbers), within the bound."""
    return list(yaml.compose_all(text, Loader=BoundedLoader))
