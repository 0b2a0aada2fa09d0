"""Layers: a verification checkout is a fresh, empty upper layer over read-only
layers made once (a checkout of the tree, what `setup` added to it), discarded
after each run. See docs/architecture.md, "Layers"."""
