"""The git hook scripts `forge hooks install` writes (templates: @PYTHON@ is the
interpreter forge ran under at install time)."""
