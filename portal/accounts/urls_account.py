"""The signed-in person's own settings: /account/…"""

from django.urls import path

from portal.accounts import views

app_name = "account"
urlpatterns = [
    path("ssh-keys/", views.account_ssh_keys, name="ssh-keys"),
    path("ssh-keys/<int:key_id>/remove", views.account_ssh_key_remove, name="ssh-key-remove"),
]
