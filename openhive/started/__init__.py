"""The app listed last in INSTALLED_APPS: its ready() marks the end of start-up (see apps.py)."""
