"""A network namespace of a sandboxed command's own (forge/base/netns/pasta.py)."""
