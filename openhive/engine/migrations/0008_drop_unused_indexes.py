"""Drop indexes that every step wrote and no query read: the exchange's own session index
(`uniq_exchange_turn` starts with the session), the subagent name's (only a substring search
reads it) and the tool name's pattern index (PostgreSQL). Plain `DROP INDEX` statements: the
`AlterField`s Django would run drop and re-validate the exchange's foreign key (a scan of the
table) on PostgreSQL and copy whole tables on SQLite."""

import django.db.models.deletion
from django.db import migrations, models

# name -> (table, column, PostgreSQL-only pattern index)
DROPPED = {
    "engine_llmexchange_session_id_168770a0": ("engine_llmexchange", "session_id", False),
    "engine_session_agent_name_e84ef46c": ("engine_session", "agent_name", False),
    "engine_session_agent_name_e84ef46c_like": ("engine_session", "agent_name", True),
    "engine_toolcall_tool_a2970285": ("engine_toolcall", "tool", False),
    "engine_toolcall_tool_a2970285_like": ("engine_toolcall", "tool", True),
}


def drop(apps, schema_editor) -> None:
    for name in DROPPED:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')


def restore(apps, schema_editor) -> None:
    postgres = schema_editor.connection.vendor == "postgresql"
    for name, (table, column, pattern) in DROPPED.items():
        if pattern and not postgres:
            continue
        ops = " varchar_pattern_ops" if pattern else ""
        schema_editor.execute(f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ("{column}"{ops})')


class Migration(migrations.Migration):
    dependencies = [
        ("engine", "0007_worker_beat"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="llmexchange",
                    name="session",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="exchanges",
                        to="engine.session",
                    ),
                ),
                migrations.AlterField(
                    model_name="session",
                    name="agent_name",
                    field=models.CharField(blank=True, default="", max_length=100),
                ),
                migrations.AlterField(
                    model_name="toolcall",
                    name="tool",
                    field=models.CharField(max_length=100),
                ),
            ],
            database_operations=[migrations.RunPython(drop, restore)],
        ),
        migrations.AddIndex(
            model_name="toolcall",
            index=models.Index(fields=["tool"], name="toolcall_tool_idx"),
        ),
    ]
