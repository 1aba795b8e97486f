"""Admin for runs: read-only (they change only through the services) with their lifecycle
events inline; staff may cancel them. Registered by :mod:`simulations.admin`."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from simulations.runs import services as run_services
from simulations.runs.models import RunEvent, SimulationRun


class RunEventInline(admin.TabularInline):
    """The run's lifecycle, read-only."""

    model = RunEvent
    extra = 0
    can_delete = False
    fields = ("at", "kind", "attempt", "message")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(SimulationRun)
class SimulationRunAdmin(admin.ModelAdmin):
    """Runs, read-only (they change only through the services); staff may cancel them."""

    inlines = [RunEventInline]
    list_display = ("id", "scenario", "owner", "status", "progress", "attempts", "created_at")
    list_filter = ("status",)
    search_fields = ("scenario__name", "owner__username")
    actions = ["cancel_runs"]
    readonly_fields = (
        "owner",
        "scenario",
        "status",
        "progress",
        "attempts",
        "worker",
        "error",
        "document",
        "result",
        "created_at",
        "enqueued_at",
        "started_at",
        "heartbeat_at",
        "finished_at",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Cancel selected runs")
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[SimulationRun]) -> None:
        cancelled = sum(run_services.run_cancel(run=run, user=request.user) for run in queryset)
        self.message_user(request, f"Cancelled {cancelled} run(s).", messages.SUCCESS)
