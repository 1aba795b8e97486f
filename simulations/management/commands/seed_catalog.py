"""``manage.py seed_catalog``: load the built-in catalog (simulations/core/data) into the DB."""

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from simulations.services import catalog_seed


class Command(BaseCommand):
    """Create or update every device, runtime profile and model of the built-in catalog.

    Idempotent: rows are matched by slug; rows that are not in the data files are kept.
    """

    help = "Load the built-in catalog (simulations/core/data/**.json) into the database."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = catalog_seed()
        except ValidationError as exc:
            raise CommandError(f"catalog not loaded: {'; '.join(exc.messages)}") from exc
        self.stdout.write(self.style.SUCCESS(f"Catalog loaded: {report}."))
