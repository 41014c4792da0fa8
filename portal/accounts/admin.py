from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin

from portal.accounts.models import ApiKey, Membership, Organisation, SSHKey, User
from portal.accounts.services import api_key_issue, api_key_revoke
from portal.accounts.team import user_deactivate
from portal.accounts.two_factor import two_factor_reset


@admin.register(User)
class UserAdmin(BaseUserAdmin):
    fieldsets = BaseUserAdmin.fieldsets + (("Trainyard", {"fields": ("staff_role",)}),)
    list_display = ("username", "email", "staff_role", "is_staff", "is_active")
    list_filter = ("staff_role", "is_staff", "is_active")
    actions = ["deactivate", "reset_two_factor"]

    @admin.action(description="Deactivate (no login; their SSH keys leave every server)")
    def deactivate(self, request, queryset):
        for user in queryset.filter(is_active=True):
            user_deactivate(user=user, by=request.user)
        self.message_user(request, "Deactivated; key syncs are queued for their organisations' "
                                   "active servers.")

    @admin.action(description="Reset two-factor sign-in (a lost phone: they set up a new app)")
    def reset_two_factor(self, request, queryset):
        done = [user.get_username() for user in queryset
                if two_factor_reset(user=user, by=request.user.get_username())]
        self.message_user(request, f"Two-factor reset for {', '.join(done)}; they were told by "
                                   f"e-mail." if done else "None of them had two-factor sign-in.")

    def save_model(self, request, obj, form, change):
        """Unticking "active" here is a deactivation too: the person's keys leave the servers."""
        was_active = change and User.objects.filter(pk=obj.pk, is_active=True).exists()
        super().save_model(request, obj, form, change)
        if was_active and not obj.is_active:
            user_deactivate(user=obj, by=request.user)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ("user",)


@admin.register(Organisation)
class OrganisationAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "kind", "parent", "require_two_factor")
    list_filter = ("kind", "require_two_factor")
    search_fields = ("name", "slug")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [MembershipInline]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("name", "prefix", "organisation", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    fields = ("organisation", "name", "prefix", "scopes", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "created_at", "last_used_at", "revoked_at")
    actions = ["revoke"]

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        issued = api_key_issue(organisation=obj.organisation, name=obj.name, by=request.user)
        obj.pk = issued.api_key.pk
        messages.warning(request, f"Copy this key now, it is not shown again: {issued.plaintext}")

    @admin.action(description="Revoke selected keys")
    def revoke(self, request, queryset):
        for key in queryset:
            api_key_revoke(api_key=key)


@admin.register(SSHKey)
class SSHKeyAdmin(admin.ModelAdmin):
    """Read-only for support: keys are added and removed on the pages or the API, which
    validate them and bring running servers up to date."""

    list_display = ("name", "fingerprint", "key_type", "bits", "organisation", "user", "created_at")
    list_filter = ("key_type",)
    search_fields = ("name", "fingerprint", "organisation__slug", "user__username")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
