from django.dispatch import Signal

# Sent inside the transaction that records a task's end (done, failed, cancelled, or failed by
# the lease reaper). kwargs: task (tasks.Task). Receivers run in that transaction: keep them short.
task_finished = Signal()
