from django.urls import path

from portal.accounts import views

app_name = "accounts"
urlpatterns = [
    path("<slug:slug>/", views.organisation_detail, name="organisation"),
    path("<slug:slug>/keys/<str:prefix>/revoke", views.api_key_revoke_view, name="api-key-revoke"),
    path("<slug:slug>/ssh-keys/", views.organisation_ssh_keys, name="ssh-keys"),
    path("<slug:slug>/ssh-keys/<int:key_id>/remove", views.organisation_ssh_key_remove,
         name="ssh-key-remove"),
]
