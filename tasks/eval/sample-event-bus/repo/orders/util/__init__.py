"""Small shared helpers (formatting, and what is left of the first storefront's helpers)."""
