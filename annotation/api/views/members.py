"""REST: a study's members."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import access, members
from annotation.api import serializers as s
from annotation.models import Membership


class StudyMembers(APIView):
    @extend_schema(responses=s.MembershipSerializer(many=True))
    def get(self, request, pk: int):
        study, _ = access.check_study(request.user, pk)
        rows = Membership.objects.filter(study=study).select_related("user").order_by("user__username")
        return Response(s.MembershipSerializer(rows, many=True).data)

    @extend_schema(request=s.MemberRequestSerializer, responses={
        200: s.MembershipSerializer,
        # An invitation sent, or no such user: one answer whichever it was (annotation.members).
        202: inline_serializer("MemberInvited", {"detail": serializers.CharField(),
                                                 "invited": serializers.CharField(), "role": serializers.CharField()}),
    })
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        access.check_owner(membership, "managing members")
        ser = s.MemberRequestSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        name, role = ser.validated_data["username"], ser.validated_data["role"]
        m = members.do_invite(study, name, role, by=request.user)  # a refusal: annotation.api.errors
        if m is None:  # invited, or no such user: one answer (annotation.members)
            return Response({"detail": members.invited_message(name, role), "invited": name, "role": role},
                            status=status.HTTP_202_ACCEPTED)
        return Response(s.MembershipSerializer(m).data)
