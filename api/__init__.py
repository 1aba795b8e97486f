"""REST API (Django REST Framework) over the catalog, scenarios and runs."""
