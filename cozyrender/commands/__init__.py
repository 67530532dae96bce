"""One click command per module; each is a thin shell over a rule module."""
