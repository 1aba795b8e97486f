"""Admin: each capability registers its own models in its own module — the catalog
(:mod:`simulations.catalog.admin`), traces, workloads and scenarios
(:mod:`simulations.scenarios.admin`), runs (:mod:`simulations.runs.admin`), measurement
sets and calibrations (:mod:`simulations.measurements.admin`). Django's admin autodiscovery
imports this module; importing the capability modules registers them.
"""

import simulations.catalog.admin
import simulations.measurements.admin
import simulations.runs.admin
import simulations.scenarios.admin  # noqa: F401
