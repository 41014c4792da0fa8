from django.urls import path

from portal.accounts import views, views_team, views_two_factor

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
]
