"""Not this node's to change."""

SAFE = True
