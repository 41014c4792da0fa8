"""The signed-in person's own settings: /account/…"""

from django.urls import path

from portal.accounts import views, views_team
from portal.accounts import views_two_factor as tf

app_name = "account"
urlpatterns = [
    path("", views_team.account_settings, name="settings"),
    path("email/", views_team.email_change, name="email"),
    path("email/confirm/<str:token>/", views_team.email_confirm, name="email-confirm"),
    path("invitations/<str:token>/", views_team.invitation_accept, name="invitation"),
    path("signup/", views_team.signup, name="signup"),
    path("signup/verify/<str:token>/", views_team.signup_verify, name="signup-verify"),
    path("two-factor/", tf.two_factor_manage, name="two-factor"),
    path("two-factor/verify/", tf.two_factor_verify, name="two-factor-verify"),
    path("two-factor/setup/", tf.two_factor_setup, name="two-factor-setup"),
    path("two-factor/recovery-codes/", tf.two_factor_codes, name="two-factor-codes"),
    path("two-factor/recovery-codes/new", tf.two_factor_codes_regenerate, name="two-factor-codes-new"),
    path("two-factor/disable", tf.two_factor_disable, name="two-factor-disable"),
    path("ssh-keys/", views.account_ssh_keys, name="ssh-keys"),
    path("ssh-keys/<int:key_id>/remove", views.account_ssh_key_remove, name="ssh-key-remove"),
]
