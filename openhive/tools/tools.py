"""Registers the built-in tool families with the tool registry: the project's discovery imports
every installed app's `tools` module, and this one imports the families."""

from . import asking, files, filesearch, history, shell, skills, web
from .plugins import tools as plugins

FAMILIES = (asking, files, filesearch, history, shell, skills, web, plugins)
