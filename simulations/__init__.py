"""The simulations app: catalog, scenarios and runs, their services, tasks and commands."""
