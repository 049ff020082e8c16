"""The app module of `NinjaAssetsConfig` (openhive/apps.py): django-ninja's templates and static
files (the API docs page) as an app, without importing ninja. Listing "ninja" itself in
INSTALLED_APPS imported it in every process at start -- ninja, and through it django.test,
unittest and jinja2: ~160 modules, ~10 MB -- although only the web process serves the API."""
