"""Server-rendered dashboard pages."""
