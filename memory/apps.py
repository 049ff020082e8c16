from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        # The chunk HNSW index is an expression with an operator class (`OpClass`): Django
        # puts the class outside the expression's parentheses only once OpClass is a known
        # index wrapper, which django.contrib.postgres's own ready() would declare. That app
        # is not installed (it would add a type lookup per new connection), so declare it here.
        from django.contrib.postgres.indexes import OpClass
        from django.db.models.indexes import IndexExpression

        if OpClass not in IndexExpression.wrapper_classes:
            IndexExpression.register_wrappers(*IndexExpression.wrapper_classes, OpClass)
