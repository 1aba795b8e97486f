"""Dashboard pages (server-rendered Django templates with Plotly charts)."""
