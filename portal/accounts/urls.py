from django.urls import path

from portal.accounts import views, views_team, views_two_factor
from portal.reseller import views as views_reseller
from portal.webhooks import views as views_webhooks

app_name = "accounts"
urlpatterns = [
    path("<slug:slug>/", views.organisation_detail, name="organisation"),
    path("<slug:slug>/keys/<str:prefix>/revoke", views.api_key_revoke_view, name="api-key-revoke"),
    path("<slug:slug>/members/invite/", views_team.member_invite, name="member-invite"),
    path("<slug:slug>/members/<int:membership_id>/role/", views_team.member_role, name="member-role"),
    path("<slug:slug>/members/<int:membership_id>/remove/", views_team.member_remove,
         name="member-remove"),
    path("<slug:slug>/invitations/<str:reference>/revoke/", views_team.invitation_revoke,
         name="invitation-revoke"),
    path("<slug:slug>/two-factor/", views_two_factor.organisation_two_factor, name="two-factor"),
    path("<slug:slug>/ssh-keys/", views.organisation_ssh_keys, name="ssh-keys"),
    path("<slug:slug>/ssh-keys/<int:key_id>/remove", views.organisation_ssh_key_remove,
         name="ssh-key-remove"),
    path("<slug:slug>/customers/", views_reseller.customer_list, name="customers"),
    path("<slug:slug>/customers/<slug:customer_slug>/", views_reseller.customer_edit, name="customer-edit"),
    path("<slug:slug>/prices/", views_reseller.resale_prices, name="resale-prices"),
    path("<slug:slug>/prices/reset/", views_reseller.resale_prices_reset, name="resale-prices-reset"),
    path("<slug:slug>/webhooks/", views_webhooks.webhook_list, name="webhooks"),
    path("<slug:slug>/webhooks/<str:reference>/", views_webhooks.webhook_detail, name="webhook"),
    path("<slug:slug>/webhooks/<str:reference>/delete/", views_webhooks.webhook_delete,
         name="webhook-delete"),
    *[path(f"<slug:slug>/webhooks/<str:reference>/{action}/", views_webhooks.webhook_action,
           {"action": action}, name=f"webhook-{action}")
      for action in ("enable", "disable", "rotate", "test")],
]
