from django.contrib import admin
from django.urls import include, path

from openhive.api import api
from openhive.views import landing_page

admin.autodiscover()  # here, not at start-up: see openhive/admin_app.py
admin.site.site_header = "OpenHive"
admin.site.site_title = "OpenHive"

urlpatterns = [
    path("", landing_page, name="landing"),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("chat/", include("openhive.chat.urls")),
]
