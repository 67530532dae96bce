"""The pool tree (`cozyrender tree`): who holds which GPUs and how much room
is left where, as a terminal tree, JSON and a self-contained HTML page.

`model.build_tree(state, audit(state))` reads every figure from the budget
library's aggregates (the ones `check` reads); `text`, `jsonout` and `html`
only lay that tree out.
"""

from .model import Tree, TreeError, build_tree

__all__ = ["Tree", "TreeError", "build_tree"]
