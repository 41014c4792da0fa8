from django.urls import path

from portal.orders import views

app_name = "orders"
urlpatterns = [
    path("", views.order_list, name="list"),
    path("place/<str:quote_reference>/", views.order_place, name="place"),
    path("<int:pk>/", views.order_detail_by_id, name="detail-by-id"),
    path("<str:reference>/", views.order_detail, name="detail"),
    path("<str:reference>/progress/", views.order_progress_partial, name="progress"),
    path("<str:reference>/cancel/", views.order_cancel, name="cancel"),
    path("<str:reference>/terminate/", views.order_terminate, name="terminate"),
    path("<str:reference>/data/read-key/", views.order_data_key, name="data-key"),
    path("<str:reference>/data/read-key/reveal/", views.order_data_key_reveal,
         name="data-key-reveal"),
    path("<str:reference>/server/", views.server_detail, name="server"),
    path("<str:reference>/server/files/<str:hostname>/<str:name>", views.server_stack_file,
         name="stack-file"),
    path("<str:reference>/server/terminate-at/", views.server_terminate_at, name="terminate-at"),
    path("<str:reference>/server/reboot/", views.server_action, {"action": "reboot"}, name="reboot"),
    path("<str:reference>/server/redeploy/", views.server_action, {"action": "redeploy"},
         name="redeploy"),
    path("<str:reference>/server/storage/reveal/", views.server_storage_reveal,
         name="storage-reveal"),
    path("<str:reference>/server/storage/rotate/", views.server_action,
         {"action": "rotate_storage_key"}, name="storage-rotate"),
    # The GPU charts card of the server page (htmx).
    path("<str:reference>/server/metrics/", views.server_metrics, name="server-metrics"),
]
