"""The site's URLs."""

from django.urls import path
from django_site import views

urlpatterns = [
    path("cached/", views.cached_page),
    path("plain/", views.plain_page),
    path("fragment/<str:var>/", views.fragment_page),
    path("fragment/<str:var>/invalidate", views.invalidate_fragment),
    path("value/<str:key>", views.value),
    path("incr/<str:name>", views.incr),
    path("count/<str:name>", views.counter),
    path("clear", views.clear),
    path("opened-by", views.opened_by),
]
