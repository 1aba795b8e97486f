"""Measurement sets and calibrations: the Django side of runtime-profile calibration
.

* :mod:`simulations.measurements.models` — MeasurementSet (catalog data with an owner and a
  visibility) and Calibration (one fit of a stack to a set, its report, and the profile it
  was saved as); imported by :mod:`simulations.models`, so they belong to the
  ``simulations`` app;
* :mod:`simulations.measurements.services` — every write: import (CSV or rows, one
  transaction, bad rows named by line and column), fit, save as a private profile or
  publish to the catalog;
* :mod:`simulations.measurements.selectors` — reads and visibility (a private set or
  profile is its owner's only).

The parsing and the fit are the core's (:mod:`simulations.core.calibration.measurements`,
:mod:`simulations.core.calibration.fit`).
"""
