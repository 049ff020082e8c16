"""OutboxMessage.task becomes a plain task id: the chat app sits below the task queue, so it
keeps the id of the task a result belongs to without a foreign key to the Task model. The column
(`task_id`) and its values stay as they were."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0003_message_trust_replies_topic_activity"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # In the database: the foreign key constraint goes, the column stays.
            database_operations=[
                migrations.AlterField(
                    model_name="outboxmessage",
                    name="task",
                    field=models.BigIntegerField(blank=True, null=True, db_column="task_id"),
                ),
            ],
            # In the models: a field named task_id over that same column.
            state_operations=[
                migrations.RemoveField(model_name="outboxmessage", name="task"),
                migrations.AddField(
                    model_name="outboxmessage",
                    name="task_id",
                    field=models.BigIntegerField(blank=True, null=True),
                ),
            ],
        ),
    ]
