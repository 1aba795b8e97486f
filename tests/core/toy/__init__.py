"""Toys that extend the core the way ``docs/architecture.md``'s recipes say, from tests
alone: a policy package with its planner screen, and a device family with its data."""
