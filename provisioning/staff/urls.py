from django.urls import path

from provisioning.staff import views

app_name = "provisioning"
urlpatterns = [
    path("approvals/", views.approvals, name="approvals"),
    path("approvals/<str:reference>/nodes/", views.approval_nodes, name="approval-nodes"),
    path("approvals/<str:reference>/approve/", views.approve, name="approve"),
    path("approvals/<str:reference>/reject/", views.reject, name="reject"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
    path("runs/<int:pk>/steps/", views.run_steps_partial, name="run-steps"),
    path("runs/<int:pk>/retry/", views.run_retry, name="run-retry"),
    path("runs/<int:pk>/swap/", views.run_swap, name="run-swap"),
    path("runs/<int:pk>/drop-storage/", views.run_drop_storage, name="run-drop-storage"),
    path("nodes/", views.node_list, name="nodes"),
    path("nodes/enrol/", views.node_enrol, name="node-enrol"),
    path("nodes/<int:pk>/", views.node_detail, name="node"),
    path("nodes/<int:pk>/edit/", views.node_edit, name="node-edit"),
    path("nodes/<int:pk>/engine/", views.node_engine, name="node-engine"),
    path("nodes/<int:pk>/power/<str:action>/", views.node_power, name="node-power"),
    path("nodes/<int:pk>/<str:action>/", views.node_action, name="node-action"),
    path("logins/", views.login_lockouts, name="login-lockouts"),
]
