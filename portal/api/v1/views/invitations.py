"""A reseller invites people to its customers' organisations: create (the person gets the link
by e-mail; the link is never in the answer) and list the pending ones. For the reseller's keys
and admins only: anyone else gets the 404 of a customer that is not theirs."""

from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.response import Response

from portal.accounts import team
from portal.accounts.models import Invitation, Membership
from portal.api.idempotency import idempotent
from portal.api.v1.pagination import NewestFirstCursor
from portal.api.v1.views.customers import _customer
from portal.api.v1.views.quotes import IDEMPOTENCY_KEY


class InvitationInputSerializer(serializers.Serializer):
    email = serializers.EmailField(max_length=254)
    role = serializers.ChoiceField(choices=[Membership.Role.MEMBER, Membership.Role.ADMIN],
                                   default=Membership.Role.MEMBER,
                                   help_text="member, or admin (invites and removes members)")


class InvitationOutputSerializer(serializers.ModelSerializer):
    organisation = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    state = serializers.SerializerMethodField()

    class Meta:
        model = Invitation
        fields = ["reference", "organisation", "email", "role", "state", "created_at",
                  "expires_at", "accepted_at"]
        read_only_fields = fields

    def get_state(self, invitation) -> str:
        return invitation.state_at(timezone.now())


class InvitationListCreateView(generics.GenericAPIView):
    pagination_class = NewestFirstCursor
    serializer_class = InvitationOutputSerializer

    def _customer(self, request, slug):
        """The customer, if the caller manages its members (the customers view's lookup, then
        the team's rule); 404 otherwise, naming nothing."""
        _, customer = _customer(request, slug)
        if not team.can_manage_members(request.user, customer):
            raise Http404
        return customer

    @extend_schema(operation_id="customer_invitations_list",
                   responses=InvitationOutputSerializer(many=True),
                   summary="Pending invitations to one of the reseller's customers")
    def get(self, request, slug: str):
        page = self.paginate_queryset(team.pending(self._customer(request, slug)))
        return self.get_paginated_response(InvitationOutputSerializer(page, many=True).data)

    @extend_schema(operation_id="customer_invitations_create", request=InvitationInputSerializer,
                   parameters=[IDEMPOTENCY_KEY], responses={201: InvitationOutputSerializer},
                   summary="Invite a person by e-mail to join one of the reseller's customers")
    @idempotent
    def post(self, request, slug: str):
        customer = self._customer(request, slug)
        data = InvitationInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        invitation = team.invitation_create(organisation=customer, by=request.user,
                                            **data.validated_data)
        return Response(InvitationOutputSerializer(invitation).data,
                        status=status.HTTP_201_CREATED)
