"""``manage.py import_measurements FILE --device SLUG --model SLUG --stack SLUG``: store a
measurement CSV as a catalog measurement set (public, no owner) through the same service as
the admin, the API and the page. Bad cells are listed by line and column, exit status 1,
and nothing is stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from simulations.measurements.services import measurement_set_import
from simulations.ownership import Visibility


class Command(BaseCommand):
    """Import a measurement CSV (operator or end-to-end rows) as a measurement set."""

    help = "Import a measurement CSV as a measurement set of --stack on --device / --model."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="CSV of operator or end-to-end rows")
        parser.add_argument("--device", required=True, help="device slug every row measured")
        parser.add_argument("--model", required=True, help="model slug every row measured")
        parser.add_argument("--stack", required=True, help="runtime profile slug measured")
        parser.add_argument("--slug", help="the set's slug (default: the file's stem)")
        parser.add_argument("--name", help="display name (default: the slug)")
        parser.add_argument("--source", default="", help="where the figures come from")
        parser.add_argument(
            "--visibility",
            choices=Visibility.values,
            default=Visibility.PUBLIC,
            help="who sees it (default public: a catalog set)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["file"])
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        slug = options["slug"] or path.stem.lower().replace("_", "-").replace(".", "-")
        try:
            row = measurement_set_import(
                slug=slug,
                name=options["name"] or slug,
                text=path.read_bytes(),
                stack=options["stack"],
                device=options["device"],
                model=options["model"],
                owner=None,
                visibility=options["visibility"],
                source=options["source"],
            )
        except ValidationError as exc:
            lines = [
                f"{key}: {message}" if key != "text" else f"{path}: {message}"
                for key, messages in exc.message_dict.items()
                for message in messages
            ]
            raise CommandError("\n".join(lines), returncode=1) from exc
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {row.slug}: {row.row_count} {row.get_format_display().lower()} rows "
                f"of {row.runtime.slug} on {row.device.slug} / {row.llm.slug}."
            )
        )
