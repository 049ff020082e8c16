from django.apps import AppConfig


class EvolutionConfig(AppConfig):
    name = "evolution"
    verbose_name = "Learning and reflection"

    def ready(self) -> None:
        # The trigger pipeline asks its registered gates before a cycle's task is created;
        # triggers never import this app.
        from triggers.gates import register_fire_gate, register_readiness

        from .services.cycles import cycle_gate, trigger_readiness

        register_fire_gate(cycle_gate)
        register_readiness(trigger_readiness)
