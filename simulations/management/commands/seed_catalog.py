"""``manage.py seed_catalog``: load the built-in catalog (simulations/core/data) into the DB."""

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from simulations.builtin_traces import builtin_traces_seed
from simulations.catalog.services import catalog_seed


class Command(BaseCommand):
    """Create what is missing of the built-in catalog and update the rows it still owns,
    and store the Azure traces the repository ships (public built-in traces) if missing.

    Rows are matched by slug. A row staff edited since the seed last wrote it (admin, API
    or page) is left alone and reported; ``--reset SLUG`` forces it back to the data files.
    Rows that are not in the data files are kept. Safe to run on every start.
    """

    help = (
        "Load the built-in catalog (simulations/core/data/**.json) into the database, "
        "keeping rows staff edited (--reset SLUG restores one)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--reset",
            action="append",
            default=[],
            metavar="SLUG",
            help="Force the built-in row(s) with this slug back to the data files, discarding "
            "staff edits (repeatable).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = catalog_seed(reset=tuple(options["reset"]))
        except ValidationError as exc:
            raise CommandError(f"catalog not loaded: {'; '.join(exc.messages)}") from exc
        self.stdout.write(self.style.SUCCESS(f"Catalog loaded: {report}."))
        try:
            created = builtin_traces_seed()
        except ValidationError as exc:
            raise CommandError(f"built-in traces not loaded: {'; '.join(exc.messages)}") from exc
        self.stdout.write(
            self.style.SUCCESS(
                "Built-in traces: "
                + (f"stored {', '.join(created)}." if created else "all already stored.")
            )
        )
