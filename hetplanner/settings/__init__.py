"""Settings split by environment: base, local (default), test, production."""
