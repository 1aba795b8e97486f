"""Plotly figures of the dashboard, built server-side with plotly.py (see :mod:`.base`)."""

from .base import Chart, chart, figure_dict

__all__ = ["Chart", "chart", "figure_dict"]
