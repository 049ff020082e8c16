"""Back office for team memories: a browser with filters, a search box that runs the same
hybrid search as the agents (once a team is chosen), and each entry's supersede history.
Entries are added through `memory_save` (chunks, embeddings, supersede rules) and not edited in
place: a change is a new version with a reason."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Case, IntegerField, QuerySet, When
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from openhive.core.admin import NoEditAdmin
from openhive.core.errors import DomainError
from openhive.core.scrubbing import scrub
from teams.models import Team

from .models import HistoryVector, Memory, MemoryChunk
from .search import memory_search
from .selectors import memory_history
from .services import memory_save

SEARCH_RESULTS = 50


class StatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("active", "active"), ("superseded", "superseded"), ("deleted", "deleted")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Memory]) -> QuerySet[Memory]:
        if self.value() == "active":
            return queryset.filter(active=True)
        if self.value() == "superseded":
            return queryset.filter(active=False, deleted_at__isnull=True)
        if self.value() == "deleted":
            return queryset.filter(deleted_at__isnull=False)
        return queryset


class MemoryAddForm(forms.ModelForm):
    supersede_reason = forms.CharField(
        required=False, help_text="Required when the key already has an active entry."
    )

    class Meta:
        model = Memory
        fields = ("team", "key", "type", "content")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        team, key = data.get("team"), (data.get("key") or "").strip()
        exists = Memory.objects.filter(team=team, key=key, active=True).exists()
        if team is not None and exists and not (data.get("supersede_reason") or "").strip():
            raise forms.ValidationError(
                f'"{key}" has an active entry in {team.name}: give a supersede reason to '
                "replace it (the old entry stays, marked superseded)."
            )
        return data


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    list_display = ("key", "team", "type", "shown_status", "short_content", "updated_at")
    list_filter = (("team", admin.RelatedOnlyFieldListFilter), "type", StatusFilter)
    list_select_related = ("team",)
    search_fields = ("key", "content")
    search_help_text = "With one team selected: hybrid search (meaning and words), best first."
    readonly_fields = (
        "team",
        "key",
        "type",
        "shown_status",
        "shown_content",
        "supersede_reason",
        "updated_by",
        "created_at",
        "updated_at",
        "deleted_at",
        "history",
    )

    def get_form(self, request: HttpRequest, obj: Memory | None = None, **kwargs: Any):
        if obj is None:
            kwargs["form"] = MemoryAddForm
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Memory | None = None) -> tuple:
        if obj is None:
            return ("team", "key", "type", "content", "supersede_reason")
        return self.readonly_fields

    def get_readonly_fields(self, request: HttpRequest, obj: Memory | None = None) -> tuple:
        return self.readonly_fields if obj is not None else ()

    def save_model(self, request: HttpRequest, obj: Memory, form: Any, change: bool) -> None:
        saved = memory_save(
            team=form.cleaned_data["team"],
            key=form.cleaned_data["key"],
            content=form.cleaned_data["content"],
            type=form.cleaned_data["type"],
            supersede_reason=form.cleaned_data.get("supersede_reason", ""),
            updated_by=f"admin:{request.user.get_username()}",
        )
        obj.pk = saved.memory.pk
        obj._state.adding = False
        obj.refresh_from_db()

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Memory], search_term: str
    ) -> tuple[QuerySet[Memory], bool]:
        team_id = request.GET.get("team__id__exact")
        if not search_term.strip() or not team_id or not team_id.isdigit():
            return super().get_search_results(request, queryset, search_term)
        team = Team.objects.filter(pk=int(team_id)).first()
        if team is None:
            return queryset.none(), False
        try:
            found = memory_search(team=team, query=search_term, limit=SEARCH_RESULTS)
        except DomainError as exc:
            self.message_user(request, exc.message, level=messages.WARNING)
            return queryset.none(), False
        if found.mode != "hybrid":
            self.message_user(request, f"Search mode: {found.mode} ({found.note})")
        ids = [hit.memory.pk for hit in found.hits]
        rank = Case(*[When(pk=pk, then=i) for i, pk in enumerate(ids)], output_field=IntegerField())
        return queryset.filter(pk__in=ids).annotate(search_rank=rank).order_by("search_rank"), False

    def get_ordering(self, request: HttpRequest) -> list[str]:
        if request.GET.get("q") and request.GET.get("team__id__exact"):
            return []  # keep the search's best-first order
        return super().get_ordering(request) or []

    @admin.display(description="status")
    def shown_status(self, obj: Memory) -> str:
        return obj.status

    @admin.display(description="content")
    def short_content(self, obj: Memory) -> str:
        text = scrub(obj.content)
        return text if len(text) <= 80 else text[:79] + "…"

    @admin.display(description="content")
    def shown_content(self, obj: Memory) -> str:
        return format_html("<pre style='white-space: pre-wrap'>{}</pre>", scrub(obj.content))

    @admin.display(description="supersede history (newest first)")
    def history(self, obj: Memory) -> str:
        rows = memory_history(memory=obj)
        return format_html(
            "<table><tr><th>version</th><th>status</th><th>reason</th><th>by</th>"
            "<th>created</th></tr>{}</table>",
            format_html_join(
                "",
                "<tr><td><a href='{}'>#{}</a>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                "<td>{}</td></tr>",
                (
                    (
                        reverse("admin:memory_memory_change", args=[m.pk]),
                        m.pk,
                        " (this)" if m.pk == obj.pk else "",
                        m.status,
                        scrub(m.supersede_reason),
                        m.updated_by,
                        m.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                    )
                    for m in rows
                ),
            ),
        )


@admin.register(MemoryChunk)
class MemoryChunkAdmin(NoEditAdmin):
    """Read-only: chunks are derived from memories (re-embedding is `manage.py openhive
    reembed`), so the operator looks but never edits."""

    list_display = ("memory", "team", "index", "embedding_model", "short_content")
    list_filter = (("team", admin.RelatedOnlyFieldListFilter), "embedding_model")
    list_select_related = ("memory", "team")
    fields = ("memory", "team", "index", "embedding_model", "content_hash", "shown_content")
    readonly_fields = fields

    @admin.display(description="content")
    def short_content(self, obj: MemoryChunk) -> str:
        return scrub(obj.content)[:80]

    @admin.display(description="content")
    def shown_content(self, obj: MemoryChunk) -> str:
        return format_html("<pre style='white-space: pre-wrap'>{}</pre>", scrub(obj.content))


@admin.register(HistoryVector)
class HistoryVectorAdmin(NoEditAdmin):
    """Read-only: the embeddings search_history makes of a team's sessions and topics."""

    list_display = ("team", "kind", "object_id", "embedding_model", "created_at")
    list_filter = (("team", admin.RelatedOnlyFieldListFilter), "kind", "embedding_model")
    list_select_related = ("team",)
    search_fields = ("team__name",)
    fields = ("team", "kind", "object_id", "embedding_model", "content_hash", "created_at")
    readonly_fields = fields
